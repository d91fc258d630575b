package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/platform/config"
)

// scenario is one run's moving parts.
type scenario struct {
	cfg        dirConfig
	dir        string
	token      string
	echo       io.Writer
	brokers    string // what nfsim and the kafka consumer connect to
	serve      *proc  // the director (and, unless split or external, the broker)
	broker     *proc  // -split-broker: the serve process that only hosts the broker
	api        *dirAPI
	probes     []*proc
	probeAddrs []string // where each probe process listens
	inProbe    []*probe.Probe
	kcons      []*kafkaCounter
	feeds      []string
	json       []string // probe JSON report files
	// -window: serve sampled through the measured phase (sampleServe).
	smu     sync.Mutex
	samples []procSample

	// -pin: the CPUs serve runs on, and those of nfsim, the probes and a
	// split broker (both empty: unpinned).
	serveCPUs, harnessCPUs []int
}

// runScenario starts everything, sends warm-up then measured traffic at rate
// for dur, drains, stops everything and returns the report.
func runScenario(ctx context.Context, cfg dirConfig, rate float64, dur time.Duration, stderr io.Writer) (r *dirReport, err error) {
	dir, err := os.MkdirTemp("", "sb-bench-director-")
	if err != nil {
		return nil, fmt.Errorf("bench director: work dir: %w", err)
	}
	sc := &scenario{cfg: cfg, dir: dir}
	if cfg.Verbose {
		sc.echo = stderr
	}
	defer func() {
		sc.stopAll()
		if cfg.Keep || err != nil {
			fmt.Fprintf(stderr, "bench director: work dir kept: %s\n", dir)
			sc.saveLogs()
		} else {
			os.RemoveAll(dir)
		}
	}()
	var tb [12]byte
	_, _ = rand.Read(tb[:])
	sc.token = hex.EncodeToString(tb[:])
	runID := hex.EncodeToString(tb[:3])
	warmID, mainID := "w"+runID, "m"+runID

	r = &dirReport{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), LoadStart: loadAvg(),
		Feed: cfg.Feed, ExactlyOnce: cfg.ExactlyOnce, TLS: cfg.TLS, Compression: cfg.Compression, Linger: cfg.Linger.String(), Key: cfg.Key, SharedProducer: cfg.SharedProd, HarnessProcs: cfg.HarnessProcs, ServeProcs: cfg.ServeProcs, Size: cfg.Size, TargetRate: rate, Mix: cfg.Mix, Feeds: cfg.Feeds,
		Duration: dur.Seconds(), Warmup: cfg.Warmup.Seconds(), InProcess: cfg.InProcess, Broker: brokerMode(cfg)}
	if cfg.InProcess {
		r.HarnessProcs = 0 // nfsim and the probes run inside the bench
	}
	if cfg.Pin && !cfg.InProcess {
		var ok bool
		if sc.serveCPUs, sc.harnessCPUs, ok = cpuPlan(cfg.ServeProcs); ok {
			r.ServeCPUs, r.HarnessCPUs = cpuList(sc.serveCPUs), cpuList(sc.harnessCPUs)
		}
	}
	if err := sc.startServe(ctx); err != nil {
		return nil, err
	}
	if err := sc.startConsumers(ctx, warmID); err != nil {
		return nil, err
	}
	if err := sc.createFeeds(ctx); err != nil {
		return nil, err
	}

	if cfg.Warmup > 0 {
		ws, _, err := sc.produce(ctx, warmID, "", rate, cfg.Warmup)
		if err != nil {
			return nil, fmt.Errorf("bench director: warm-up: %w", err)
		}
		if err := sc.drain(ctx, ws.Total()); err != nil {
			return nil, fmt.Errorf("bench director: warm-up: %w", err)
		}
	}
	warmDelivered, err := sc.delivered(ctx)
	if err != nil {
		return nil, err
	}

	before := sc.sampleAll()
	stopSampling := sc.sampleServe(before["serve"])
	st, nfsimUse, err := sc.produce(ctx, mainID, warmID, rate, dur)
	stopSampling()
	if err != nil {
		return nil, err
	}
	after := sc.sampleAll()
	r.Elapsed = st.Elapsed.Seconds()
	r.Sent, r.SentTotal, r.ProducerErrors = st.Sent, st.Total(), st.Errors
	if st.Ack.N > 0 {
		r.ProducerAck = &st.Ack
	}
	if st.ProduceRTT.N > 0 {
		r.ProduceRTT = &st.ProduceRTT
	}
	r.SentRate = float64(r.SentTotal) / r.Elapsed
	if err := sc.drain(ctx, warmDelivered+st.Prewarm+r.SentTotal); err != nil {
		r.DrainCutOff = err.Error()
		fmt.Fprintf(stderr, "bench director: %v (what is missing counts as lost)\n", err)
	}
	// The feed counts a copy once the sink wrote it; give the consumers a
	// moment to read what is still in their socket buffers.
	time.Sleep(500 * time.Millisecond)
	final := sc.sampleAll()
	reports, err := sc.collect()
	if err != nil {
		return nil, err
	}
	r.LoadEnd = loadAvg()
	r.fill(sc, reports, before, after, final, nfsimUse)
	r.soak(sc, reports, before["serve"].At, after["serve"].At)
	return r, nil
}

func brokerMode(cfg dirConfig) string {
	switch {
	case cfg.Brokers != "":
		return "external " + cfg.Brokers
	case cfg.SplitBroker:
		return "embedded, own serve process"
	case cfg.NFAuth:
		return "embedded in serve; every client authenticated, the NFs with SCRAM-SHA-512 as nf"
	}
	return "embedded in serve"
}

// serveArgs are the flags of one serve process, every listener on a
// loopback port of the kernel's choice (startServeProc reads which).
func (sc *scenario) serveArgs(name string) []string {
	args := []string{"serve", "-data-dir", filepath.Join(sc.dir, name), "-http-addr", "127.0.0.1:0", "-admin-token", sc.token,
		"-curri-addr", "127.0.0.1:0", "-ingest-addr", "", "-kafka-addr", "127.0.0.1:0", "-log-level", "warn"}
	if sc.cfg.SoloReads {
		args = append(args, "-feed-solo-reads")
	}
	if sc.cfg.NFAuth {
		args = append(args, "-kafka-local-anonymous=false")
	}
	return append(args, strings.Fields(sc.cfg.ServeArgs)...)
}

// startServeProc starts a serve process named name with args and waits until
// it is ready; it answers where it listens (its listeners file).
func (sc *scenario) startServeProc(ctx context.Context, name string, args, env []string, cpus []int) (*proc, config.Listeners, error) {
	p, err := startProcEnv(ctx, name, sc.cfg.Bin, args, env, cpus, sc.echo)
	if err != nil {
		return nil, config.Listeners{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ls, err := config.WaitListeners(wctx, filepath.Join(sc.dir, name), p.pid(), p.done)
	if err != nil {
		return p, ls, fmt.Errorf("%s: %w\n%s", name, err, lastLines(p.out.String(), 20))
	}
	return p, ls, waitReady(ctx, "http://"+ls.HTTP, p)
}

func (sc *scenario) startServe(ctx context.Context) error {
	switch {
	case sc.cfg.Brokers != "":
		sc.brokers = sc.cfg.Brokers
	case sc.cfg.SplitBroker:
		p, ls, err := sc.startServeProc(ctx, "broker", sc.serveArgs("broker"), nil, sc.harnessCPUs)
		sc.broker = p
		if err != nil {
			return err
		}
		sc.brokers = ls.Kafka
	}
	args := sc.serveArgs("serve")
	if sc.brokers != "" {
		args = append(args, "-kafka-brokers", sc.brokers)
	}
	p, ls, err := sc.startServeProc(ctx, "serve", args, procsEnv(sc.cfg.ServeProcs), sc.serveCPUs)
	sc.serve = p
	if err != nil {
		return err
	}
	if sc.brokers == "" {
		sc.brokers = ls.Kafka
	}
	sc.api = &dirAPI{base: "http://" + ls.HTTP, token: sc.token, hc: &http.Client{Timeout: 10 * time.Second}}
	return nil
}

// harnessEnv is the environment the nfsim and probe children get on top of
// the bench's: GOMAXPROCS when -harness-procs is set. Each of them is one
// stream; with a P per CPU their idle Ps spin looking for work on the two
// cores serve needs (at 30K: nfsim 0.44 -> 0.30, probe 0.33 -> 0.25 cores).
func (sc *scenario) harnessEnv() []string { return procsEnv(sc.cfg.HarnessProcs) }

// procsEnv sets a child's GOMAXPROCS to n; none for 0 (Go's default).
func procsEnv(n int) []string {
	if n <= 0 {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(n)}
}

// startConsumers starts one consumer per feed: probes (synthetic, http2) or
// in-bench Kafka readers (kafka).
func (sc *scenario) startConsumers(ctx context.Context, warmID string) error {
	var cert, key string
	if sc.cfg.TLS && sc.cfg.Feed != "kafka" {
		var err error
		if cert, key, err = writeSelfSigned(sc.dir); err != nil {
			return fmt.Errorf("bench director: %w", err)
		}
	}
	for i := 0; i < sc.cfg.Feeds; i++ {
		name := fmt.Sprintf("bench-%d", i)
		sc.feeds = append(sc.feeds, name)
		if sc.cfg.Feed == "kafka" {
			kc, err := startKafkaCounter(ctx, sc.brokers, name, warmID, sc.cfg.ExactlyOnce)
			if err != nil {
				return err
			}
			sc.kcons = append(sc.kcons, kc)
			continue
		}
		if sc.cfg.InProcess {
			p, err := probe.New(probe.Config{Listen: "127.0.0.1:0", Mode: sc.cfg.Feed, TLSCert: cert, TLSKey: key, IgnoreRun: warmID, Window: sc.cfg.Window})
			if err != nil {
				return err
			}
			if err := p.Start(ctx); err != nil {
				return err
			}
			sc.inProbe = append(sc.inProbe, p)
			continue
		}
		jf := filepath.Join(sc.dir, name+".json")
		args := []string{"probe", "-mode", sc.cfg.Feed, "-listen", "127.0.0.1:0", "-json", jf, "-ignore-run", warmID, "-interval", "10s"}
		if sc.cfg.Window > 0 {
			args = append(args, "-window", sc.cfg.Window.String())
		}
		if cert != "" {
			args = append(args, "-tls-cert", cert, "-tls-key", key)
		}
		p, err := startProcEnv(ctx, "probe-"+strconv.Itoa(i), sc.cfg.Bin, args, sc.harnessEnv(), sc.harnessCPUs, sc.echo)
		if err != nil {
			return err
		}
		sc.probes = append(sc.probes, p)
		sc.json = append(sc.json, jf)
		addr, err := probeAddr(ctx, p, 20*time.Second)
		if err != nil {
			return err
		}
		sc.probeAddrs = append(sc.probeAddrs, addr)
	}
	return nil
}

// consumerAddr is where feed i delivers.
func (sc *scenario) consumerAddr(i int) string {
	if sc.cfg.InProcess {
		return sc.inProbe[i].Addr()
	}
	return sc.probeAddrs[i]
}

func (sc *scenario) createFeeds(ctx context.Context) error {
	mix, _ := nfsim.ParseMix(sc.cfg.Mix)
	var sources []string
	for k := range mix {
		sources = append(sources, k)
	}
	sort.Strings(sources)
	for i, name := range sc.feeds {
		spec := map[string]any{"name": name, "type": sc.cfg.Feed, "sources": sources, "start": "earliest"}
		tls := map[string]any{"enabled": true, "ca_file": filepath.Join(sc.dir, "probe-cert.pem"), "server_name": "localhost"}
		switch sc.cfg.Feed {
		case "synthetic":
			spec["endpoint"] = sc.consumerAddr(i)
			if sc.cfg.TLS {
				spec["tls"] = tls
			}
		case "http2":
			scheme := "http"
			if sc.cfg.TLS {
				scheme = "https"
				spec["tls"] = tls
			}
			spec["url"] = scheme + "://" + sc.consumerAddr(i) + "/copies"
		case "kafka":
			spec["topic"] = name
			if sc.cfg.ExactlyOnce {
				spec["exactly_once"] = true
			}
		}
		if err := sc.api.do(ctx, http.MethodPost, "/api/v1/feeds", spec, nil); err != nil {
			return fmt.Errorf("bench director: create feed %s: %w", name, err)
		}
	}
	// A feed reports "connected" only after its first delivery, so this
	// only checks that every feed built its sink; the topics are empty and
	// the feeds start at the earliest offset, so no copy is missed.
	time.Sleep(300 * time.Millisecond)
	for _, name := range sc.feeds {
		st, err := sc.status(ctx, name)
		if err != nil {
			return err
		}
		if st.State == "error" {
			return fmt.Errorf("bench director: feed %s: %s", name, st.LastError)
		}
	}
	return nil
}

// feedStatus is the part of GET /api/v1/feeds/{name}/status the bench reads.
type feedStatus struct {
	State     string `json:"state"`
	Delivered int64  `json:"delivered"`
	Failed    int64  `json:"failed"`
	Retries   int64  `json:"retries"`
	Lag       int64  `json:"lag"`
	LastError string `json:"last_error"`
}

func (sc *scenario) status(ctx context.Context, name string) (feedStatus, error) {
	var body struct {
		Status feedStatus `json:"status"`
	}
	if err := sc.api.do(ctx, http.MethodGet, "/api/v1/feeds/"+url.PathEscape(name)+"/status", nil, &body); err != nil {
		return feedStatus{}, fmt.Errorf("bench director: status of %s: %w", name, err)
	}
	return body.Status, nil
}

// delivered is the smallest delivered count over the feeds.
func (sc *scenario) delivered(ctx context.Context) (int64, error) {
	low := int64(-1)
	for _, name := range sc.feeds {
		st, err := sc.status(ctx, name)
		if err != nil {
			return 0, err
		}
		if low < 0 || st.Delivered < low {
			low = st.Delivered
		}
	}
	return low, nil
}

// drain waits until every feed delivered want copies (0: until lag is 0 and
// the count stops moving), at most cfg.Drain without progress.
func (sc *scenario) drain(ctx context.Context, want int64) error {
	last, lastAt := int64(-1), time.Now()
	limit := time.Now().Add(sc.cfg.DrainMax)
	for {
		d, err := sc.delivered(ctx)
		if err != nil {
			return err
		}
		if want > 0 && d >= want {
			return nil
		}
		if d != last {
			last, lastAt = d, time.Now()
		} else if want == 0 && time.Since(lastAt) > 300*time.Millisecond {
			return nil
		}
		if time.Since(lastAt) > sc.cfg.Drain {
			return fmt.Errorf("feeds stalled at %d delivered of %d for %v", d, want, sc.cfg.Drain)
		}
		if time.Now().After(limit) {
			return fmt.Errorf("feeds at %d delivered of %d after -drain-max %v", d, want, sc.cfg.DrainMax)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// produce runs nfsim for dur at rate with run id id, after -prewarm copies
// under prewarmID when that is set; it returns what was sent and the
// producer's own CPU and peak RSS (a child's, or zero in-process).
func (sc *scenario) produce(ctx context.Context, id, prewarmID string, rate float64, dur time.Duration) (nfsim.Stats, usage, error) {
	prewarm := sc.cfg.Prewarm
	if prewarmID == "" {
		prewarm = 0
	}
	if sc.cfg.InProcess {
		mix, _ := nfsim.ParseMix(sc.cfg.Mix)
		st, err := nfsim.Run(ctx, nfsim.Config{Brokers: strings.Split(sc.brokers, ","), Rate: rate, Mix: mix, Size: sc.cfg.Size,
			Duration: dur, RunID: id, Progress: time.Hour, Compression: sc.cfg.Compression, Linger: sc.cfg.Linger, Key: sc.cfg.Key,
			Prewarm: prewarm, PrewarmRunID: prewarmID, SharedProducer: sc.cfg.SharedProd}, io.Discard)
		return st, usage{Name: "nfsim (in bench)"}, err
	}
	args := []string{"nfsim", "-brokers", sc.brokers, "-rate", strconv.FormatFloat(rate, 'f', -1, 64), "-mix", sc.cfg.Mix,
		"-size", strconv.Itoa(sc.cfg.Size), "-duration", dur.String(), "-run-id", id, "-compression", sc.cfg.Compression,
		"-linger", sc.cfg.Linger.String(), "-key", sc.cfg.Key}
	if prewarm > 0 {
		args = append(args, "-prewarm", prewarm.String(), "-prewarm-run-id", prewarmID)
	}
	if sc.cfg.SharedProd {
		args = append(args, "-shared-producer")
	}
	if sc.cfg.NFAuth {
		pw, err := os.ReadFile(filepath.Join(sc.dir, "serve", "kafka-nf-password"))
		if err != nil {
			return nfsim.Stats{}, usage{}, fmt.Errorf("the NF credential: %w", err)
		}
		args = append(args, "-sasl-mechanism", "SCRAM-SHA-512", "-sasl-user", "nf", "-sasl-password", strings.TrimSpace(string(pw)))
	}
	start := time.Now()
	p, err := startProcEnv(ctx, "nfsim", sc.cfg.Bin, args, sc.harnessEnv(), sc.harnessCPUs, sc.echo)
	if err != nil {
		return nfsim.Stats{}, usage{}, err
	}
	if err := p.wait(ctx); err != nil {
		return nfsim.Stats{}, usage{}, err
	}
	st, err := parseNFSimSummary(p.out.String())
	if err != nil {
		return st, usage{}, fmt.Errorf("nfsim output: %w\n%s", err, lastLines(p.out.String(), 10))
	}
	st.RunID = id
	s := p.exited()
	wall := time.Since(start).Seconds()
	return st, usage{Name: "nfsim", CPUSeconds: s.CPU.Seconds(), Cores: s.CPU.Seconds() / wall, PeakRSSMiB: float64(s.HWMKiB) / 1024}, nil
}

// parseLatencyLine reads nfsim's "p50 X  p99 X  p99.9 X  max X  (n=N; ...)".
func parseLatencyLine(e string) nfsim.AckLatency {
	f := strings.Fields(e)
	if len(f) < 9 {
		return nfsim.AckLatency{}
	}
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	l := nfsim.AckLatency{P50: num(f[1]), P99: num(f[3]), P999: num(f[5]), Max: num(f[7])}
	n, _ := strings.CutPrefix(strings.TrimRight(f[8], ";)"), "(n=")
	l.N, _ = strconv.ParseInt(n, 10, 64)
	return l
}

// parseNFSimSummary reads nfsim's closing table: "done in D", then
// "  NF sent" rows up to "total".
func parseNFSimSummary(out string) (nfsim.Stats, error) {
	st := nfsim.Stats{Sent: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	in := false
	for sc.Scan() {
		line := sc.Text()
		if _, d, ok := strings.Cut(line, ": done in "); ok {
			el, err := time.ParseDuration(strings.TrimSpace(d))
			if err != nil {
				return st, fmt.Errorf("elapsed %q: %w", d, err)
			}
			st.Elapsed, in = el, true
			continue
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "prewarm "); ok && st.Elapsed > 0 {
			n, _ := strconv.ParseInt(strings.Fields(e)[0], 10, 64)
			st.Prewarm = n
			continue
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "ack latency ms: "); ok && st.Elapsed > 0 {
			st.Ack = parseLatencyLine(e)
			continue
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "produce round trip ms: "); ok && st.Elapsed > 0 {
			st.ProduceRTT = parseLatencyLine(e)
			continue
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "errors "); ok && st.Elapsed > 0 {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.Fields(e)[0], ","), 10, 64)
			st.Errors = n
			continue
		}
		if !in {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[0] != "NF" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				continue
			}
			if f[0] == "total" {
				in = false
				continue
			}
			st.Sent[f[0]] = n
		}
	}
	if st.Elapsed == 0 || len(st.Sent) == 0 {
		return st, errors.New("no summary")
	}
	return st, nil
}

// sampleAll samples every long-lived process.
func (sc *scenario) sampleAll() map[string]procSample {
	m := map[string]procSample{"bench": selfSample()}
	for _, p := range append([]*proc{sc.serve, sc.broker}, sc.probes...) {
		if p != nil {
			m[p.name] = p.sample()
		}
	}
	return m
}

// collect stops the consumers and gathers their reports.
func (sc *scenario) collect() ([]probe.Report, error) {
	var out []probe.Report
	for _, p := range sc.inProbe {
		out = append(out, p.Snapshot())
		_ = p.Close()
	}
	sc.inProbe = nil
	for _, k := range sc.kcons {
		out = append(out, k.report())
		k.close()
	}
	for i, p := range sc.probes {
		if err := p.stop(15 * time.Second); err != nil {
			return nil, fmt.Errorf("bench director: %s: %w", p.name, err)
		}
		b, err := os.ReadFile(sc.json[i])
		if err != nil {
			return nil, fmt.Errorf("bench director: %s report: %w", p.name, err)
		}
		var rep probe.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("bench director: %s report: %w", p.name, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

func (sc *scenario) stopAll() {
	for _, p := range sc.inProbe {
		_ = p.Close()
	}
	for _, k := range sc.kcons {
		k.close()
	}
	for _, p := range append(sc.probes, sc.serve, sc.broker) {
		if p != nil {
			_ = p.stop(15 * time.Second)
		}
	}
}

func (sc *scenario) saveLogs() {
	for _, p := range append(sc.probes, sc.serve, sc.broker) {
		if p != nil {
			_ = os.WriteFile(filepath.Join(sc.dir, p.name+".log"), []byte(p.out.String()), 0o644)
		}
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// dirAPI is a minimal client of the REST API.
type dirAPI struct {
	base, token string
	hc          *http.Client
}

func (a *dirAPI) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// createTopic makes the kafka feed's output topic.
func createTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx, 1, -1, nil, topic)
	if err != nil {
		return err
	}
	for _, t := range resp {
		if t.Err != nil && !strings.Contains(t.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			return t.Err
		}
	}
	return nil
}
