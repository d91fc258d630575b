package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

// A soak (-window): the measured phase cut into windows, each with its
// delivery rate and latency (from the probes' windows) and serve's resident
// set and CPU (sampled here every sampleEvery), so that a long run shows
// whether memory and latency stay flat.

// sampleEvery is how often serve is sampled during a soak.
const sampleEvery = 10 * time.Second

// soakWindow is one window of the measured phase.
type soakWindow struct {
	EndS     float64 `json:"end_s"` // since the measured phase began
	Received int64   `json:"received"`
	MPS      float64 `json:"mps"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	// ServeRSSMiB is serve's largest resident set sampled in the window;
	// ServeCores its CPU over the window.
	ServeRSSMiB float64 `json:"serve_rss_mib"`
	ServeCores  float64 `json:"serve_cores"`
}

// sampleServe samples serve every sampleEvery until the returned func is
// called (nothing without -window).
func (sc *scenario) sampleServe(first procSample) (stop func()) {
	if sc.cfg.Window <= 0 || sc.serve == nil {
		return func() {}
	}
	sc.samples = append(sc.samples[:0], first)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s := sc.serve.sample()
				sc.smu.Lock()
				sc.samples = append(sc.samples, s)
				sc.smu.Unlock()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// soak fills r.Windows from the probes' windows that lie in the measured
// phase [from, to] and the samples of serve, and judges flatness: the last
// window's p99 within 1.5× of the first's, its resident set within 10 %.
func (r *dirReport) soak(sc *scenario, reps []probe.Report, from, to time.Time) {
	w := sc.cfg.Window
	if w <= 0 || len(reps) == 0 {
		return
	}
	sc.smu.Lock()
	samples := append([]procSample(nil), sc.samples...)
	sc.smu.Unlock()
	for i, pw := range reps[0].Windows {
		start := pw.End.Add(-w)
		if start.Before(from.Add(-time.Second)) || pw.End.After(to.Add(time.Second)) {
			continue // warm-up, or the drain
		}
		sw := soakWindow{EndS: pw.End.Sub(from).Seconds(), Received: pw.Received, MPS: float64(pw.Received) / w.Seconds(),
			P50Ms: float64(pw.Latency.P50) / 1000, P99Ms: float64(pw.Latency.P99) / 1000, MaxMs: float64(pw.Latency.Max) / 1000}
		for _, rep := range reps[1:] { // several feeds: the worst of them
			if i < len(rep.Windows) {
				o := rep.Windows[i].Latency
				sw.P99Ms, sw.MaxMs = max(sw.P99Ms, float64(o.P99)/1000), max(sw.MaxMs, float64(o.Max)/1000)
			}
		}
		// CPU from the sample nearest the window's start to the one
		// nearest its end; RSS the largest in it.
		var first, last *procSample
		for j := range samples {
			s := &samples[j]
			if s.At.Before(start.Add(-sampleEvery/2)) || s.At.After(pw.End.Add(sampleEvery/2)) {
				continue
			}
			if first == nil {
				first = s
			}
			last = s
			if s.At.After(start) {
				sw.ServeRSSMiB = max(sw.ServeRSSMiB, float64(s.RSSKiB)/1024)
			}
		}
		if first != nil && last != first {
			sw.ServeCores = (last.CPU - first.CPU).Seconds() / last.At.Sub(first.At).Seconds()
		}
		r.Windows = append(r.Windows, sw)
	}
	if len(r.Windows) < 2 {
		r.Failures = append(r.Failures, fmt.Sprintf("soak: %d window(s) of %s in the measured phase; want 2 or more", len(r.Windows), w))
		r.Pass = false
		return
	}
	a, b := r.Windows[0], r.Windows[len(r.Windows)-1]
	mark := func(ok bool) string {
		if ok {
			return "ok  "
		}
		r.Pass = false
		return "MISS"
	}
	p99ok, rssok := b.P99Ms <= 1.5*a.P99Ms, b.ServeRSSMiB <= 1.1*a.ServeRSSMiB
	r.Targets = append(r.Targets,
		fmt.Sprintf("%s soak: last window's p99 %.2f ms (target <= 1.5 × the first's %.2f ms)", mark(p99ok), b.P99Ms, a.P99Ms),
		fmt.Sprintf("%s soak: serve's RSS in the last window %.0f MiB (target <= 1.1 × the first's %.0f MiB)", mark(rssok), b.ServeRSSMiB, a.ServeRSSMiB))
	if !p99ok {
		r.Failures = append(r.Failures, fmt.Sprintf("soak: p99 grew from %.2f to %.2f ms", a.P99Ms, b.P99Ms))
	}
	if !rssok {
		r.Failures = append(r.Failures, fmt.Sprintf("soak: serve's RSS grew from %.0f to %.0f MiB", a.ServeRSSMiB, b.ServeRSSMiB))
	}
}

// writeSoak prints the windows.
func (r *dirReport) writeSoak(w io.Writer) {
	if len(r.Windows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  %8s %10s %9s %9s %9s %14s %11s\n", "window", "MPS", "p50 ms", "p99 ms", "max ms", "serve RSS MiB", "serve cores")
	for _, x := range r.Windows {
		fmt.Fprintf(w, "  %7.0fs %10.0f %9.3f %9.3f %9.3f %14.1f %11.2f\n", x.EndS, x.MPS, x.P50Ms, x.P99Ms, x.MaxMs, x.ServeRSSMiB, x.ServeCores)
	}
}
