package director

import (
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// TestFeedStatusConcurrent reads a feed's status from several goroutines
// while deliveries are counted, as the API's handlers and the alarm loop do:
// the latency figures come from one merged histogram the windowed one owns,
// which two readers at once must not share (the race detector caught it in
// the console test).
func TestFeedStatusConcurrent(t *testing.T) {
	m := offlineManager(t)
	f := m.newFeed(runPlan{FeedSpec: FeedSpec{Name: "probe-1", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "10.0.0.1:5000"}}})
	sent := time.Now().Add(-2 * time.Millisecond).UnixNano()
	batch := []*nfcopy.Copy{{Timestamp: sent, Raw: []byte("x")}, {Timestamp: sent, Raw: []byte("y")}}
	f.countDelivered(batch)

	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if g == 0 {
					f.countDelivered(batch)
				}
				st := f.status()
				if st.LatencyP50 < 0.002 || st.LatencyMax < st.LatencyP50 { // seconds
					t.Errorf("status: p50 %.3f ms, max %.3f ms; want ≥ 2 ms, max ≥ p50", st.LatencyP50*1e3, st.LatencyMax*1e3)
					return
				}
			}
		}()
	}
	wg.Wait()
}
