package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

// Reference figures (seed page: OCNADD 23.2, secure synthetic feed) and the
// targets of this benchmark on a 2-core host.
const (
	refRate        = 30000
	refAvgMs       = 3.15
	refSuccessPct  = 99.99
	refBusyCores   = 17.0 // sum of the CPU table: utilisation × pods × CPU limit
	targetP99Ms    = 10.0
	targetCores    = 1.0
	targetRSSMiB   = 1024.0
	targetFeedsP99 = 20.0
)

// usage is one component's CPU over the measured phase and its peak RSS.
type usage struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Cores      float64 `json:"avg_cores"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

// feedResult is what one consumer saw of the measured run.
type feedResult struct {
	Name         string             `json:"name"`
	Unique       int64              `json:"unique"`
	Received     int64              `json:"received"`
	Duplicates   int64              `json:"duplicates"`
	Lost         int64              `json:"lost"`
	Invalid      int64              `json:"invalid"`
	DeliveredPct float64            `json:"delivered_pct"`
	PerNF        map[string]int64   `json:"per_nf"`
	PerNFRate    map[string]float64 `json:"per_nf_mps"`
	Rate         float64            `json:"mps"`
	Warmup       int64              `json:"warmup_copies"`
	Latency      probe.Latency      `json:"latency_us"`
}

// dirReport is the result of one run.
type dirReport struct {
	Date           string  `json:"date"`
	CPUs           int     `json:"cpus"`
	LoadStart      string  `json:"loadavg_start"`
	LoadEnd        string  `json:"loadavg_end"`
	Feed           string  `json:"feed"`
	ExactlyOnce    bool    `json:"exactly_once,omitempty"`
	TLS            bool    `json:"tls"`
	Size           int     `json:"size"`
	Compression    string  `json:"compression"`
	Linger         string  `json:"linger"`
	SharedProducer bool    `json:"shared_producer,omitempty"` // nfsim: one Kafka client for every NF type
	Key            string  `json:"key"`
	HarnessProcs   int     `json:"harness_gomaxprocs"`
	ServeProcs     int     `json:"serve_gomaxprocs,omitempty"`
	ServeCPUs      string  `json:"serve_cpus,omitempty"`   // -pin: serve's CPUs
	HarnessCPUs    string  `json:"harness_cpus,omitempty"` // -pin: nfsim's, the probes' and a split broker's
	TargetRate     float64 `json:"target_rate"`
	Mix            string  `json:"mix"`
	Feeds          int     `json:"feeds"`
	Duration       float64 `json:"duration_s"`
	Warmup         float64 `json:"warmup_s"`
	InProcess      bool    `json:"inprocess"`
	Broker         string  `json:"broker"`

	Elapsed        float64          `json:"elapsed_s"`
	Sent           map[string]int64 `json:"sent"`
	SentTotal      int64            `json:"sent_total"`
	SentRate       float64          `json:"sent_mps"`
	ProducerErrors int64            `json:"producer_errors"`
	// ProducerAck: nfsim's copy-made-to-acknowledged times, the producing
	// side's share of the end-to-end latency (absent from older nfsims).
	ProducerAck *nfsim.AckLatency `json:"producer_ack_ms,omitempty"`
	// ProduceRTT: nfsim's produce requests, written to response read (N
	// counts requests).
	ProduceRTT *nfsim.AckLatency `json:"produce_rtt_ms,omitempty"`
	Results    []feedResult      `json:"feeds_results"`

	Serve        usage   `json:"serve"`
	BrokerProc   *usage  `json:"broker_process,omitempty"`
	Probes       []usage `json:"probes,omitempty"`
	NFSim        usage   `json:"nfsim"`
	Bench        usage   `json:"bench"`
	MPSPerDirCPU float64 `json:"mps_per_director_core"`

	// DrainCutOff is set when the feeds had not delivered everything when
	// the bench stopped waiting: "lost" then includes copies still queued
	// in Kafka (a backlog, not a delivery failure of the director).
	DrainCutOff string `json:"drain_cut_off,omitempty"`

	Windows []soakWindow `json:"windows,omitempty"` // -window

	Pass     bool     `json:"pass"`
	Failures []string `json:"failures,omitempty"`
	Targets  []string `json:"targets"`
}

func usageOf(name string, a, b procSample) usage {
	cpu := (b.CPU - a.CPU).Seconds()
	u := usage{Name: name, CPUSeconds: cpu, PeakRSSMiB: float64(b.HWMKiB) / 1024}
	if wall := b.At.Sub(a.At).Seconds(); wall > 0 {
		u.Cores = cpu / wall
	}
	return u
}

// fill computes the report from the consumers' reports and the CPU samples
// taken at the start and end of the measured phase (final: after draining,
// for peak RSS).
func (r *dirReport) fill(sc *scenario, reps []probe.Report, before, after, final map[string]procSample, nf usage) {
	serveName := "serve (director + embedded broker)"
	if sc.broker != nil || sc.cfg.Brokers != "" {
		serveName = "serve (director)"
	}
	r.Serve = usageOf(serveName, before["serve"], after["serve"])
	r.Serve.PeakRSSMiB = float64(final["serve"].HWMKiB) / 1024
	if sc.broker != nil {
		u := usageOf("serve (embedded broker only)", before["broker"], after["broker"])
		u.PeakRSSMiB = float64(final["broker"].HWMKiB) / 1024
		r.BrokerProc = &u
	}
	for _, p := range sc.probes {
		u := usageOf(p.name, before[p.name], after[p.name])
		u.PeakRSSMiB = float64(final[p.name].HWMKiB) / 1024
		r.Probes = append(r.Probes, u)
	}
	r.NFSim = nf
	bench := "bench process"
	switch {
	case sc.cfg.InProcess:
		bench = "bench (nfsim + probes in-process)"
	case sc.cfg.Feed == "kafka":
		bench = "bench (kafka consumers)"
	}
	r.Bench = usageOf(bench, before["bench"], after["bench"])
	if r.Serve.Cores > 0 {
		r.MPSPerDirCPU = r.SentRate / r.Serve.Cores
	}
	r.Pass = true
	fail := func(f string, a ...any) {
		r.Pass = false
		r.Failures = append(r.Failures, fmt.Sprintf(f, a...))
	}
	if r.ProducerErrors > 0 {
		fail("nfsim: %d copies not accepted by Kafka", r.ProducerErrors)
	}
	for i, rep := range reps {
		fr := feedResult{Name: sc.feeds[i], Unique: rep.Unique, Received: rep.Received, Duplicates: rep.Duplicates,
			Invalid: rep.Invalid, PerNF: rep.PerNF, PerNFRate: map[string]float64{}, Warmup: rep.Warmup, Latency: rep.Latency}
		fr.Lost = max(r.SentTotal-rep.Unique, rep.Missing)
		if r.SentTotal > 0 {
			fr.DeliveredPct = 100 * float64(rep.Unique) / float64(r.SentTotal)
		}
		if r.Elapsed > 0 {
			fr.Rate = float64(rep.Unique) / r.Elapsed
			for k, v := range rep.PerNF {
				fr.PerNFRate[k] = float64(v) / r.Elapsed
			}
		}
		if fr.Lost > 0 && r.DrainCutOff != "" {
			fail("%s: %d of %d not delivered when the drain was cut off (%s)", fr.Name, fr.Lost, r.SentTotal, r.DrainCutOff)
		} else if fr.Lost > 0 {
			fail("%s: %d lost of %d", fr.Name, fr.Lost, r.SentTotal)
		}
		if fr.Invalid > 0 {
			fail("%s: %d invalid copies (%v)", fr.Name, fr.Invalid, rep.FirstErrors)
		}
		r.Results = append(r.Results, fr)
	}
	check := func(ok bool, f string, a ...any) {
		mark := "ok  "
		if !ok {
			mark = "MISS"
		}
		r.Targets = append(r.Targets, mark+" "+fmt.Sprintf(f, a...))
	}
	p99Bound := targetP99Ms
	if r.Feeds > 1 {
		p99Bound = targetFeedsP99
	}
	check(r.worstDelivered() >= 100, "delivered %.4f%% (target 100%%)", r.worstDelivered())
	check(r.worstAvg() <= refAvgMs*1000, "avg latency %.3f ms (target <= %.2f ms)", r.worstAvg()/1000, refAvgMs)
	check(r.worstP99() <= p99Bound*1000, "p99 latency %.3f ms (target <= %.0f ms)", r.worstP99()/1000, p99Bound)
	check(r.Serve.Cores <= targetCores, "%s %.2f cores (target <= %.0f)", r.Serve.Name, r.Serve.Cores, targetCores)
	check(r.Serve.PeakRSSMiB <= targetRSSMiB, "%s peak RSS %.0f MiB (target <= %.0f)", r.Serve.Name, r.Serve.PeakRSSMiB, targetRSSMiB)
}

func (r *dirReport) worstP99() float64 {
	w := 0.0
	for _, f := range r.Results {
		w = max(w, float64(f.Latency.P99))
	}
	return w
}

func (r *dirReport) worstAvg() float64 {
	w := 0.0
	for _, f := range r.Results {
		w = max(w, f.Latency.Avg)
	}
	return w
}

func (r *dirReport) worstDelivered() float64 {
	w := 100.0
	for _, f := range r.Results {
		w = min(w, f.DeliveredPct)
	}
	return w
}

func (r *dirReport) totalLost() int64 {
	var n int64
	for _, f := range r.Results {
		n += f.Lost
	}
	return n
}

func (r *dirReport) writeTable(out io.Writer) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	tls := "TLS"
	if !r.TLS {
		tls = "plain TCP"
	}
	fmt.Fprintf(w, "bench director  %s  %d CPUs  load %s -> %s\n", r.Date, r.CPUs, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(w, "  %s feed (%s), %d B (%s, linger %s, key %s), mix %s, %d feed(s), target %.0f MPS, %.0fs measured after %.0fs warm-up, broker %s%s\n",
		r.Feed, tls, r.Size, r.Compression, r.Linger, r.Key, r.Mix, r.Feeds, r.TargetRate, r.Elapsed, r.Warmup, r.Broker, map[bool]string{true: ", in-process"}[r.InProcess])
	if r.ExactlyOnce {
		fmt.Fprintf(w, "  exactly-once: each poll in a Kafka transaction with its offsets; the consumer reads read_committed\n")
	}
	if r.SharedProducer {
		fmt.Fprintf(w, "  nfsim: one Kafka producer for every NF type\n")
	} else {
		fmt.Fprintf(w, "  nfsim: one Kafka producer per NF type\n")
	}
	if r.HarnessProcs > 0 {
		fmt.Fprintf(w, "  nfsim and probe with GOMAXPROCS=%d\n", r.HarnessProcs)
	}
	if r.ServeProcs > 0 {
		fmt.Fprintf(w, "  serve with GOMAXPROCS=%d\n", r.ServeProcs)
	}
	if r.ServeCPUs != "" {
		fmt.Fprintf(w, "  pinned: serve on CPU %s; nfsim, probes (and a split broker) on CPU %s\n", r.ServeCPUs, r.HarnessCPUs)
	} else {
		fmt.Fprintf(w, "  not pinned: every process may run on every CPU\n")
	}
	fmt.Fprintf(w, "  sent %d (%.0f MPS), producer errors %d\n", r.SentTotal, r.SentRate, r.ProducerErrors)
	if a := r.ProducerAck; a != nil {
		fmt.Fprintf(w, "  produce ack ms (copy made to Kafka's ack): p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", a.P50, a.P99, a.P999, a.Max)
	}
	if a := r.ProduceRTT; a != nil {
		fmt.Fprintf(w, "  produce request round trip ms: p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (%d requests)\n", a.P50, a.P99, a.P999, a.Max, a.N)
	}
	nfs := make([]string, 0, len(r.Sent))
	for k := range r.Sent {
		nfs = append(nfs, k)
	}
	sort.Strings(nfs)
	for _, f := range r.Results {
		fmt.Fprintf(w, "\n  feed %s\n", f.Name)
		fmt.Fprintf(w, "    %-8s %10s %10s %10s %9s\n", "NF", "sent", "delivered", "MPS", "deliv %")
		for _, k := range nfs {
			pct := 0.0
			if r.Sent[k] > 0 {
				pct = 100 * float64(f.PerNF[k]) / float64(r.Sent[k])
			}
			fmt.Fprintf(w, "    %-8s %10d %10d %10.0f %9.4f\n", k, r.Sent[k], f.PerNF[k], f.PerNFRate[k], pct)
		}
		fmt.Fprintf(w, "    %-8s %10d %10d %10.0f %9.4f\n", "total", r.SentTotal, f.Unique, f.Rate, f.DeliveredPct)
		lost := "lost"
		if r.DrainCutOff != "" {
			lost = "not delivered by the drain cut-off"
		}
		fmt.Fprintf(w, "    duplicates %d, %s %d, invalid %d (warm-up copies %d, excluded)\n", f.Duplicates, lost, f.Lost, f.Invalid, f.Warmup)
		l := f.Latency
		fmt.Fprintf(w, "    e2e latency ms: avg %.3f  p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (n=%d)\n",
			l.Avg/1000, float64(l.P50)/1000, float64(l.P95)/1000, float64(l.P99)/1000, float64(l.P999)/1000, float64(l.Max)/1000, l.Count)
	}
	fmt.Fprintf(w, "\n  %-38s %10s %10s %12s\n", "process", "CPU s", "cores", "peak RSS MiB")
	row := func(u usage) {
		fmt.Fprintf(w, "  %-38s %10.2f %10.2f %12.1f\n", u.Name, u.CPUSeconds, u.Cores, u.PeakRSSMiB)
	}
	row(r.Serve)
	if r.BrokerProc != nil {
		row(*r.BrokerProc)
	}
	for _, p := range r.Probes {
		row(p)
	}
	if r.NFSim.Name != "" && !r.InProcess {
		row(r.NFSim)
	}
	row(r.Bench)
	fmt.Fprintf(w, "  MPS per director core: %.0f\n", r.MPSPerDirCPU)
	r.writeSoak(w)
	fmt.Fprintf(w, "\n  reference (OCNADD 23.2, bare metal): %d MPS, avg %.2f ms, %.2f%% success, ~%.0f busy cores\n",
		refRate, refAvgMs, refSuccessPct, refBusyCores)
	for _, t := range r.Targets {
		fmt.Fprintf(w, "  %s\n", t)
	}
	if !r.Pass {
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  FAIL %s\n", f)
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench director: write %s: %w", path, err)
	}
	return nil
}
