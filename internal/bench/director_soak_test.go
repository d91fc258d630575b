package bench

import (
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

// TestSoakWindows: the probes' windows in the measured phase become the
// report's, with serve's resident set and cores from the samples, and a
// soak whose memory or p99 grows fails.
func TestSoakWindows(t *testing.T) {
	from := time.Unix(1_800_000_000, 0)
	const w = time.Minute
	sc := &scenario{cfg: dirConfig{Window: w}}
	for i := range 31 { // every 10 s for 5 minutes: 0.5 cores, RSS growing 1 MiB a sample
		sc.samples = append(sc.samples, procSample{At: from.Add(time.Duration(i) * sampleEvery),
			CPU: time.Duration(i) * sampleEvery / 2, RSSKiB: int64(100+i) << 10})
	}
	win := func(end time.Duration, p99us int64) probe.Window {
		return probe.Window{End: from.Add(end), Received: 60_000, Latency: probe.Latency{P99: p99us}}
	}
	rep := probe.Report{Windows: []probe.Window{win(0, 9000), win(time.Minute, 1000), win(2*time.Minute, 1100),
		win(5*time.Minute, 1400), win(6*time.Minute, 500)}} // warm-up, three windows, the drain
	r := &dirReport{Pass: true}
	r.soak(sc, []probe.Report{rep}, from, from.Add(5*time.Minute))
	if len(r.Windows) != 3 {
		t.Fatalf("%d windows, want 3: %+v", len(r.Windows), r.Windows)
	}
	if x := r.Windows[0]; x.MPS != 1000 || x.P99Ms != 1 || x.ServeCores < 0.49 || x.ServeCores > 0.51 || x.ServeRSSMiB != 106 {
		t.Errorf("first window %+v; want 1,000 MPS, p99 1 ms, 0.5 cores, 106 MiB", x)
	}
	// RSS 106 -> 130 MiB: more than 10 % growth.
	if r.Pass || len(r.Failures) != 1 {
		t.Errorf("pass %v, failures %q; want the RSS growth to fail the soak, the p99 (1.4×) not", r.Pass, r.Failures)
	}
}
