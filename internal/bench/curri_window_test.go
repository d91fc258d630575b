package bench

import (
	"errors"
	"testing"
	"time"
)

// TestSwapWindowCountsLateAnswers: a call due inside a swap window counts
// for it even when answered after the window closed (a schedule running
// behind), and calls due outside do not.
func TestSwapWindowCountsLateAnswers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := &swapWindow{start: t0, hist: newHist()}
	tests := []struct {
		name string
		due  time.Time
		open bool
		want bool
	}{
		{"before the window", t0.Add(-time.Millisecond), true, false},
		{"at the start", t0, true, true},
		{"while open", t0.Add(time.Second), true, true},
		{"due inside, window since closed", t0.Add(time.Second), false, true},
		{"due at the close", t0.Add(2 * time.Second), false, false},
		{"due after the close", t0.Add(3 * time.Second), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.end.Store(0)
			if !tt.open {
				w.end.Store(t0.Add(2 * time.Second).UnixNano())
			}
			if got := w.holds(tt.due); got != tt.want {
				t.Errorf("holds(%v) = %v, want %v", tt.due.Sub(t0), got, tt.want)
			}
		})
	}

	w.end.Store(t0.Add(2 * time.Second).UnixNano())
	w.record(3*time.Millisecond, response{status: 200}, nil)
	w.record(900*time.Millisecond, response{status: 200}, nil)
	w.record(0, response{}, errors.New("reset"))
	w.record(time.Millisecond, response{status: 500}, nil)
	var rr reloadResult
	w.fill(&rr)
	if rr.Calls != 3 || rr.TransportErrors != 1 || rr.Non200 != 1 {
		t.Errorf("window tallies %+v, want 3 answered (one non-200) and 1 transport error", rr)
	}
	if rr.MaxUs < 899_000 || rr.P99Us < 899_000 {
		t.Errorf("p99 %d µs, max %d µs: the late 900 ms call is missing", rr.P99Us, rr.MaxUs)
	}
}
