package probe

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSeqTrackMatchesSet checks seqTrack against a plain set on random
// streams: in order, shuffled within a window, with duplicates, with gaps
// that never fill, and jumps beyond the bit window.
func TestSeqTrackMatchesSet(t *testing.T) {
	for _, window := range []int64{1 << 27, 256} {
		for seed := range uint64(200) {
			r := rand.New(rand.NewPCG(seed, uint64(window)))
			tr := seqTrack{window: window}
			seen := map[int64]bool{}
			var maxN int64
			next := int64(1)
			for range 5000 {
				var n int64
				switch k := r.IntN(100); {
				case k < 50:
					n = next
					next++
				case k < 80:
					n = next + int64(r.IntN(300)) // ahead, out of order
				case k < 90 && next > 1:
					n = 1 + r.Int64N(next) // a repeat, mostly
				case k < 92:
					n = next + 1000 + r.Int64N(5000) // far ahead
				case k < 95:
					next += int64(r.IntN(20)) // a gap that may never fill
					n = next
				default:
					n = next
					next++
				}
				if got, want := tr.add(n), !seen[n]; got != want {
					t.Fatalf("window %d seed %d: add(%d) = %v, want %v", window, seed, n, got, want)
				}
				seen[n] = true
				maxN = max(maxN, n)
				if got := tr.unique(); got != int64(len(seen)) {
					t.Fatalf("window %d seed %d: unique %d, want %d", window, seed, got, len(seen))
				}
			}
			if tr.missing() != maxN-int64(len(seen)) {
				t.Fatalf("missing %d, want %d", tr.missing(), maxN-int64(len(seen)))
			}
		}
	}
}

func BenchmarkSeqTrackInterleaved(b *testing.B) {
	// 12 partitions' worth of copies, each in order, interleaved in runs.
	var order []int64
	for n := int64(1); n <= 12000; n++ {
		order = append(order, n)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+64 < len(order); i += 64 {
		r.Shuffle(64, func(a, c int) { order[i+a], order[i+c] = order[i+c], order[i+a] })
	}
	b.ReportAllocs()
	for b.Loop() {
		var tr seqTrack
		for _, n := range order {
			tr.add(n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(order)), "ns/seq")
}

// TestWindows: each window reports what arrived in it, and its own
// latency, not the run's: a slow window after a fast one shows as slow.
func TestWindows(t *testing.T) {
	s := newStats(0, "warm")
	now := time.Now()
	for i := range 1000 {
		s.copySeen(fmt.Sprintf("r1/SCP/%d", i), "SCP", 100, 10, now.Add(-time.Millisecond).UnixNano(), now)
	}
	s.copySeen("warm/SCP/1", "SCP", 100, 10, now.Add(-time.Hour).UnixNano(), now) // warm-up: in no window
	s.closeWindow(now)
	for i := range 500 {
		s.copySeen(fmt.Sprintf("r1/SCP/%d", 1000+i), "SCP", 100, 10, now.Add(-20*time.Millisecond).UnixNano(), now)
	}
	s.closeWindow(now.Add(time.Second))
	s.closeWindow(now.Add(2 * time.Second))
	w := s.report("synthetic").Windows
	if len(w) != 3 {
		t.Fatalf("%d windows, want 3", len(w))
	}
	if w[0].Received != 1000 || w[0].Latency.P99 < 900 || w[0].Latency.P99 > 1100 {
		t.Errorf("first window: %d copies, p99 %d µs; want 1000 at ~1000 µs", w[0].Received, w[0].Latency.P99)
	}
	if w[1].Received != 500 || w[1].Latency.P99 < 19_000 || w[1].Latency.P99 > 21_000 {
		t.Errorf("second window: %d copies, p99 %d µs; want 500 at ~20,000 µs", w[1].Received, w[1].Latency.P99)
	}
	if w[2].Received != 0 || w[2].Latency.Count != 0 {
		t.Errorf("empty window: %+v", w[2])
	}
}
