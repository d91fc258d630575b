package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// curriReport is the outcome of a run, printed as a table and written as
// JSON with -json.
type curriReport struct {
	Target    string      `json:"target"`
	ServerRun string      `json:"server_run,omitempty"` // how the server the bench started ran; empty with -target
	TLS       string      `json:"tls,omitempty"`        // how HTTPS was used; empty for plain HTTP
	Mode      string      `json:"mode"`                 // open-loop | closed-loop
	Rate      int         `json:"rate"`                 // target calls/s; 0 with closed loop
	Pace      string      `json:"pace,omitempty"`       // open loop: "precise" (timerfd) or "runtime" (Go timers)
	Conns     int         `json:"conns"`
	DurationS float64     `json:"duration_s"`
	WarmupS   float64     `json:"warmup_s"`
	Pool      int         `json:"pool"`
	Shape     *RuleShape  `json:"rule_set,omitempty"` // nil when no rules were loaded
	Load      *loadResult `json:"load,omitempty"`
	Directory int         `json:"directory_entries,omitempty"`

	Calls       int64         `json:"calls"`
	CallsPerSec float64       `json:"calls_per_s"`
	Latency     latencyReport `json:"latency_us"`
	// SendLag (open loop) is how late the generator wrote calls against
	// their due times: the part of Latency that is the load generator's own
	// scheduling on the shared cores, not the server.
	SendLag *latencyReport `json:"send_lag_us,omitempty"`
	// FromSend (open loop) is each call's time from its write to its
	// answer: what a generator that times from its own write sees (vegeta
	// does), leaving out its lateness against the schedule.
	FromSend  *latencyReport   `json:"latency_from_send_us,omitempty"`
	Decisions map[string]int64 `json:"decisions"`
	// ByClass: decisions by the rule kind the request was drawn to hit.
	ByClass         map[string]map[string]int64 `json:"decisions_by_class"`
	TransportErrors int64                       `json:"transport_errors"`
	Non200          int64                       `json:"non_200"`
	Indeterminate   int64                       `json:"indeterminate"`
	Unsent          int64                       `json:"unsent"`
	WarmupCalls     int64                       `json:"warmup_calls"`
	WarmupErrors    int64                       `json:"warmup_errors"`
	FirstError      string                      `json:"first_error,omitempty"`
	// ReconnectEveryS and Reconnects: connections closed and reopened
	// (TCP, TLS handshake, HEAD probe) during the run, as CUCM nodes do.
	ReconnectEveryS float64 `json:"reconnect_every_s,omitempty"`
	Reconnects      int64   `json:"reconnects,omitempty"`
	ReconnectErrors int64   `json:"reconnect_errors,omitempty"`
	// Storm: -storm's connections, opened at once halfway through.
	Storm *stormReport `json:"storm,omitempty"`

	// GeneratorCPUSeconds is the bench's own CPU over the measured window
	// (-1 unknown): on a shared box, CPU the server did not have.
	GeneratorCPUSeconds float64 `json:"generator_cpu_seconds"`

	Server    *serverReport  `json:"server,omitempty"`
	Reloads   []reloadResult `json:"reloads,omitempty"`
	Reference referenceFigs  `json:"reference"`
}

type stormReport struct {
	Conns      int            `json:"conns"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	ConnectUs  *latencyReport `json:"connect_us,omitempty"` // dial to HEAD answered
}

type loadResult struct {
	ListsPostMs float64 `json:"lists_post_ms"`
	RulesPutMs  float64 `json:"rules_put_ms"`
	RulesLiveMs float64 `json:"rules_live_ms"` // from the PUT until the rules answer calls
	TotalMs     float64 `json:"total_ms"`
	// -directory: the CSV import's PUT, and until its names answer calls.
	DirectoryPutMs  float64 `json:"directory_put_ms,omitempty"`
	DirectoryLiveMs float64 `json:"directory_live_ms,omitempty"`
}

type latencyReport struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P95  int64   `json:"p95"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p99_9"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

type serverReport struct {
	CPUSeconds         float64 `json:"cpu_seconds"`
	CoresUsed          float64 `json:"cores_used"`
	CallsPerCoreSecond float64 `json:"calls_per_core_s"`
	RSSStartBytes      float64 `json:"rss_start_bytes"`
	RSSPeakBytes       float64 `json:"rss_peak_bytes"`
	RSSSamples         int     `json:"rss_samples"`
	ScrapeError        string  `json:"scrape_error,omitempty"`
	// From the server's own request-duration histogram over the measured
	// window: the bucket bound holding p99 and the largest observation
	// (seconds; -1 if unknown; "+Inf" past the largest bucket).
	RequestP99S bucketBound `json:"request_p99_s"`
	RequestMaxS bucketBound `json:"request_max_s"`
	// -calls-stream: call records produced into CALLS over the measured
	// window, and those dropped or failed.
	CallsStream *callsStreamReport `json:"calls_stream,omitempty"`
}

type callsStreamReport struct {
	Produced int64 `json:"produced"`
	Dropped  int64 `json:"dropped"`
	Failed   int64 `json:"failed"`
}

// bucketBound is a histogram bucket bound in seconds. The last bucket's is
// +Inf, which encoding/json refuses, so it is written as the string "+Inf"
// (as Prometheus writes le="+Inf"); a run whose slowest request passed the
// largest bound lost its whole -json report before.
type bucketBound float64

func (b bucketBound) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(b), 1) {
		return []byte(`"+Inf"`), nil
	}
	return json.Marshal(float64(b))
}

type reloadResult struct {
	Generation      int     `json:"generation"`
	AtS             float64 `json:"at_s"` // since the start of the run (warmup included)
	PutMs           float64 `json:"put_ms"`
	LiveMs          float64 `json:"live_ms"`
	Calls           int64   `json:"calls"` // calls due from the PUT until 250 ms after live
	P99Us           int64   `json:"p99_us"`
	MaxUs           int64   `json:"max_us"`
	TransportErrors int64   `json:"transport_errors"`
	Non200          int64   `json:"non_200"`
	Indeterminate   int64   `json:"indeterminate"`
	Error           string  `json:"error,omitempty"`
	// The generator's send lag of the window's calls (part of their
	// latency), and the server's own request time over the window (read to
	// written; bucket bounds, -1 if a /metrics scrape failed).
	LagP99Us    int64       `json:"send_lag_p99_us"`
	LagMaxUs    int64       `json:"send_lag_max_us"`
	ServerP99S  bucketBound `json:"server_request_p99_s"`
	ServerP999S bucketBound `json:"server_request_p99_9_s"`
	ServerMaxS  bucketBound `json:"server_request_max_s"`
	// requests the server took over 5 ms to answer (the bound for
	// the swap), by its own histogram; -1 unknown
	ServerOver5ms int64 `json:"server_requests_over_5ms"`
	// The control window: as long as the swap window, halfway to the next
	// swap, when no replacement runs (absent if none fitted).
	QuietAtS           float64     `json:"quiet_at_s,omitempty"`
	QuietCalls         int64       `json:"quiet_calls,omitempty"`
	QuietP99Us         int64       `json:"quiet_p99_us,omitempty"`
	QuietMaxUs         int64       `json:"quiet_max_us,omitempty"`
	QuietErrors        int64       `json:"quiet_errors,omitempty"`
	QuietLagP99Us      int64       `json:"quiet_send_lag_p99_us,omitempty"`
	QuietLagMaxUs      int64       `json:"quiet_send_lag_max_us,omitempty"`
	QuietServerP99S    bucketBound `json:"quiet_server_request_p99_s,omitempty"`
	QuietServerP999S   bucketBound `json:"quiet_server_request_p99_9_s,omitempty"`
	QuietServerMaxS    bucketBound `json:"quiet_server_request_max_s,omitempty"`
	QuietServerOver5ms int64       `json:"quiet_server_requests_over_5ms"`
}

// referenceFigs are the reference appliance's published numbers
// (Call Telemetry sizing page; see reference/curri.md §4.4).
type referenceFigs struct {
	CallsPerVCPU        float64 `json:"calls_per_vcpu_s"`
	P95MsRange          string  `json:"p95_ms"`
	RuleSetCallsPerCore float64 `json:"rule_set_calls_per_core_s"`
	RuleSetP95Ms        float64 `json:"rule_set_p95_ms"`
	RuleSet             string  `json:"rule_set"`
}

var reference = referenceFigs{
	CallsPerVCPU:        100,
	P95MsRange:          "4-12",
	RuleSetCallsPerCore: 58,
	RuleSetP95Ms:        17,
	RuleSet:             "1,000 rules (800 exact + 200 regex)",
}

func (r *curriReport) fill(res *driveResult) {
	t := res.tally
	r.Calls = t.calls
	if res.measured > 0 {
		r.CallsPerSec = float64(t.calls) / res.measured.Seconds()
	}
	if t.hist.TotalCount() > 0 {
		r.Latency = latencyOf(t.hist)
	}
	if t.lag.TotalCount() > 0 {
		l := latencyOf(t.lag)
		r.SendLag = &l
		f := latencyOf(t.fromSend)
		r.FromSend = &f
	}
	r.Decisions = map[string]int64{}
	for d, n := range t.decisions {
		if n > 0 {
			r.Decisions[decisionNames[d]] = n
		}
	}
	r.ByClass = map[string]map[string]int64{}
	for c := range t.byClass {
		for d, n := range t.byClass[c] {
			if n == 0 {
				continue
			}
			if r.ByClass[classNames[c]] == nil {
				r.ByClass[classNames[c]] = map[string]int64{}
			}
			r.ByClass[classNames[c]][decisionNames[d]] = n
		}
	}
	r.GeneratorCPUSeconds = -1
	if res.genCPU >= 0 {
		r.GeneratorCPUSeconds = res.genCPU.Seconds()
	}
	r.TransportErrors, r.Non200, r.Unsent = t.transport, t.non200, t.unsent
	r.Reconnects, r.ReconnectErrors = t.reconnects, t.reconnectErr
	if st := res.storm; st != nil {
		r.Storm = &stormReport{Conns: st.conns, Errors: st.errors, FirstError: st.firstErr}
		if st.connect.TotalCount() > 0 {
			l := latencyOf(st.connect)
			r.Storm.ConnectUs = &l
		}
	}
	r.Indeterminate = t.decisions[decIndeterminate]
	r.WarmupCalls, r.WarmupErrors, r.FirstError = t.warmup, t.warmupErr, t.firstErr
	if s := res.server; s != nil {
		sr := &serverReport{CPUSeconds: s.cpuSeconds, RSSStartBytes: s.rssStart, RSSPeakBytes: s.rssPeak,
			RSSSamples: s.rssSamples, ScrapeError: res.serverError,
			RequestP99S: bucketBound(bucketQuantile(s.firstBuckets, s.lastBuckets, 0.99)),
			RequestMaxS: bucketBound(bucketQuantile(s.firstBuckets, s.lastBuckets, 1))}
		if res.measured > 0 {
			sr.CoresUsed = s.cpuSeconds / res.measured.Seconds()
		}
		if s.callsProduced >= 0 {
			sr.CallsStream = &callsStreamReport{Produced: int64(s.callsProduced), Dropped: int64(s.callsDropped), Failed: int64(s.callsFailed)}
		}
		if s.cpuSeconds > 0 {
			sr.CallsPerCoreSecond = float64(t.calls) / s.cpuSeconds
		}
		r.Server = sr
	}
	r.Reloads = res.reloads
	r.Reference = reference
}

func latencyOf(h *hdrhistogram.Histogram) latencyReport {
	return latencyReport{
		P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P95: h.ValueAtQuantile(95),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max(), Mean: h.Mean(),
	}
}

// boundOf renders a histogram bucket bound in seconds.
func boundOf(s float64) string {
	switch {
	case s < 0:
		return "n/a"
	case math.IsInf(s, 1):
		return "> 100 ms"
	}
	return fmt.Sprintf("<= %g ms", s*1000)
}

// countOf renders a count that is -1 when unknown.
func countOf(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return strconv.FormatInt(n, 10)
}

func msOf(us int64) string { return fmt.Sprintf("%.3f ms", float64(us)/1000) }

func (r *curriReport) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, a...)...) }
	p("target", "%s", r.Target)
	if r.ServerRun != "" {
		p("server run", "%s", r.ServerRun)
	}
	if r.TLS != "" {
		p("https", "%s", r.TLS)
	}
	if r.Shape != nil {
		p("rule set", "%s", r.Shape)
	} else {
		p("rule set", "as found on the server (no -api: nothing loaded)")
	}
	if r.Load != nil {
		p("loaded", "rules live %.1f ms after the PUT (PUT %.1f ms; lists %.1f ms; total %.1f ms)",
			r.Load.RulesLiveMs, r.Load.RulesPutMs, r.Load.ListsPostMs, r.Load.TotalMs)
		if r.Directory > 0 {
			p("directory", "%d entries imported as CSV in %.1f ms, naming callers %.1f ms after the PUT",
				r.Directory, r.Load.DirectoryPutMs, r.Load.DirectoryLiveMs)
		}
	}
	if r.Rate > 0 {
		p("load", "open loop at %d calls/s over %d keep-alive conns, %s pacing; %gs measured after %gs warmup", r.Rate, r.Conns, r.Pace, r.DurationS, r.WarmupS)
	} else {
		p("load", "closed loop (max) over %d keep-alive conns; %gs measured after %gs warmup", r.Conns, r.DurationS, r.WarmupS)
	}
	p("calls", "%d answered, %.1f calls/s", r.Calls, r.CallsPerSec)
	l := r.Latency
	p("latency", "p50 %s  p90 %s  p95 %s  p99 %s  p99.9 %s  max %s  (mean %.3f ms; from intended send time)",
		msOf(l.P50), msOf(l.P90), msOf(l.P95), msOf(l.P99), msOf(l.P999), msOf(l.Max), l.Mean/1000)
	if g := r.SendLag; g != nil {
		p("send lag", "p50 %s  p99 %s  max %s  (the generator's own lateness against the schedule, part of the latency above)",
			msOf(g.P50), msOf(g.P99), msOf(g.Max))
	}
	if f := r.FromSend; f != nil {
		p("from send", "p50 %s  p95 %s  p99 %s  max %s  (from each call's write: what a generator timing from its own write, as vegeta does, reports)",
			msOf(f.P50), msOf(f.P95), msOf(f.P99), msOf(f.Max))
	}
	if st := r.Storm; st != nil {
		line := fmt.Sprintf("%d connections opened at once halfway through, %d failed", st.Conns, st.Errors)
		if c := st.ConnectUs; c != nil {
			line += fmt.Sprintf("; dial to HEAD answered p50 %s  p99 %s  max %s", msOf(c.P50), msOf(c.P99), msOf(c.Max))
		}
		if st.FirstError != "" {
			line += "; first error: " + st.FirstError
		}
		p("storm", "%s", line)
	}
	p("decisions", "%s", joinCounts(r.Decisions, decisionNames[:]))
	for _, c := range classNames {
		if m := r.ByClass[c]; m != nil {
			p("  "+c, "%s", joinCounts(m, decisionNames[:]))
		}
	}
	p("errors", "transport %d  non-200 %d  Indeterminate %d  unsent %d  (warmup: %d calls, %d errors)",
		r.TransportErrors, r.Non200, r.Indeterminate, r.Unsent, r.WarmupCalls, r.WarmupErrors)
	if r.FirstError != "" {
		p("first error", "%s", r.FirstError)
	}
	if r.ReconnectEveryS > 0 {
		p("reconnects", "%d, %d failed (each connection closed and reopened every %gs: TCP, TLS handshake, HEAD probe; calls that failed are in errors above)",
			r.Reconnects, r.ReconnectErrors, r.ReconnectEveryS)
	}
	if s := r.Server; s != nil {
		p("server", "CPU %.2f s (%.2f cores) -> %.0f calls/s per core; RSS %.1f MB at start, peak %.1f MB (%d samples)",
			s.CPUSeconds, s.CoresUsed, s.CallsPerCoreSecond, s.RSSStartBytes/1e6, s.RSSPeakBytes/1e6, s.RSSSamples)
		p("server time", "p99 %s, max %s (the server's own histogram: request read to response written)",
			boundOf(float64(s.RequestP99S)), boundOf(float64(s.RequestMaxS)))
		if c := s.CallsStream; c != nil {
			p("calls stream", "%d call records produced into CALLS, %d dropped, %d failed (measured window)", c.Produced, c.Dropped, c.Failed)
		}
		if s.ScrapeError != "" {
			p("", "metrics: %s", s.ScrapeError)
		}
	} else {
		p("server", "not measured (no -api)")
	}
	if r.GeneratorCPUSeconds >= 0 && r.DurationS > 0 {
		p("generator", "CPU %.2f s (%.2f cores): the bench's own, on the cores it shares with the server", r.GeneratorCPUSeconds, r.GeneratorCPUSeconds/r.DurationS)
	}
	for _, rr := range r.Reloads {
		line := fmt.Sprintf("at %.1fs: PUT %.1f ms, live %.1f ms; swap window %d calls, p99 %s, max %s, errors %d, non-200 %d, Indeterminate %d; send lag p99 %s, max %s; server time p99 %s, p99.9 %s, max %s, %s over 5 ms",
			rr.AtS, rr.PutMs, rr.LiveMs, rr.Calls, msOf(rr.P99Us), msOf(rr.MaxUs), rr.TransportErrors, rr.Non200, rr.Indeterminate,
			msOf(rr.LagP99Us), msOf(rr.LagMaxUs), boundOf(float64(rr.ServerP99S)), boundOf(float64(rr.ServerP999S)), boundOf(float64(rr.ServerMaxS)), countOf(rr.ServerOver5ms))
		if rr.Error != "" {
			line += "; " + rr.Error
		}
		p(fmt.Sprintf("reload %d", rr.Generation), "%s", line)
		if rr.QuietCalls > 0 {
			p("", "  no swap, same length at %.1fs: %d calls, p99 %s, max %s, errors %d; send lag p99 %s, max %s; server time p99 %s, p99.9 %s, max %s, %s over 5 ms",
				rr.QuietAtS, rr.QuietCalls, msOf(rr.QuietP99Us), msOf(rr.QuietMaxUs), rr.QuietErrors,
				msOf(rr.QuietLagP99Us), msOf(rr.QuietLagMaxUs), boundOf(float64(rr.QuietServerP99S)), boundOf(float64(rr.QuietServerP999S)), boundOf(float64(rr.QuietServerMaxS)), countOf(rr.QuietServerOver5ms))
		}
	}
	ref := r.Reference
	p("reference", "Call Telemetry: ~%.0f calls/s per vCPU at P95 %s ms; %.0f calls/s per core with %s at P95 %.0f ms",
		ref.CallsPerVCPU, ref.P95MsRange, ref.RuleSetCallsPerCore, ref.RuleSet, ref.RuleSetP95Ms)
	return tw.Flush()
}

func joinCounts(m map[string]int64, order []string) string {
	var parts []string
	for _, k := range order {
		if n, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "  ")
}

func (r *curriReport) writeJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write -json %s: %w", path, err)
	}
	return nil
}
