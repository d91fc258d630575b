package bench

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestSwapWindowCountsLateAnswers: a call due inside a swap window counts
// for it even when answered after the window closed (a schedule running
// behind), and calls due outside do not.
func TestSwapWindowCountsLateAnswers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWindow(t0)
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
	w.record(3*time.Millisecond, 50*time.Microsecond, response{status: 200}, nil)
	w.record(900*time.Millisecond, 700*time.Millisecond, response{status: 200}, nil)
	w.record(0, 0, response{}, errors.New("reset"))
	w.record(time.Millisecond, 0, response{status: 500}, nil)
	// The server's histogram at the window's edges: 1,000 requests in
	// between, the slowest in the 10 ms bucket.
	w.srvFirst = []bucket{{0.001, 500}, {0.005, 600}, {0.01, 600}, {math.Inf(1), 600}}
	w.srvLast = []bucket{{0.001, 1480}, {0.005, 1598}, {0.01, 1600}, {math.Inf(1), 1600}}
	var rr reloadResult
	w.fill(&rr)
	if rr.Calls != 3 || rr.TransportErrors != 1 || rr.Non200 != 1 {
		t.Errorf("window tallies %+v, want 3 answered (one non-200) and 1 transport error", rr)
	}
	if rr.MaxUs < 899_000 || rr.P99Us < 899_000 {
		t.Errorf("p99 %d µs, max %d µs: the late 900 ms call is missing", rr.P99Us, rr.MaxUs)
	}
	if rr.LagMaxUs < 699_000 || rr.LagMaxUs > 701_000 {
		t.Errorf("send lag max %d µs, want the 700 ms one", rr.LagMaxUs)
	}
	if rr.ServerP99S != 0.005 || rr.ServerMaxS != 0.01 {
		t.Errorf("server time p99 %v s, max %v s over the window, want 0.005 and 0.01", rr.ServerP99S, rr.ServerMaxS)
	}
	if rr.ServerOver5ms != 2 {
		t.Errorf("%d server requests over 5 ms in the window, want 2", rr.ServerOver5ms)
	}
}

// TestQuietWindow: a swap's control window has the swap window's length,
// starts halfway to the next swap, holds only calls due inside it, and is
// left out when it would reach the next swap.
func TestQuietWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWindow(t0)
	w.end.Store(t0.Add(1500 * time.Millisecond).UnixNano())
	q := quietWindow(w, 15*time.Second, t0.Add(15*time.Second))
	if q == nil {
		t.Fatal("no control window between swaps 15 s apart")
	}
	if !q.start.Equal(t0.Add(7500*time.Millisecond)) || q.end.Load() != t0.Add(9*time.Second).UnixNano() {
		t.Fatalf("control window %v..%v after the swap, want 7.5 s..9 s", q.start.Sub(t0), time.Duration(q.end.Load()-t0.UnixNano()))
	}
	for _, c := range []struct {
		due  time.Duration
		want bool
	}{{1 * time.Second, false}, {7499 * time.Millisecond, false}, {7500 * time.Millisecond, true}, {8 * time.Second, true}, {9 * time.Second, false}} {
		if got := q.holds(t0.Add(c.due)); got != c.want {
			t.Errorf("holds(%v) = %v, want %v", c.due, got, c.want)
		}
	}
	q.record(2*time.Millisecond, time.Millisecond, response{status: 200}, nil)
	q.record(time.Millisecond, 0, response{status: 500}, nil)
	rr := reloadResult{AtS: 20}
	q.fillQuiet(&rr)
	if rr.QuietCalls != 2 || rr.QuietErrors != 1 || rr.QuietAtS != 27.5 || rr.QuietMaxUs < 1990 || rr.QuietLagMaxUs < 990 {
		t.Errorf("control tallies %+v", rr)
	}
	if rr.QuietServerMaxS != -1 {
		t.Errorf("server time max %v without scrapes, want -1 (n/a)", rr.QuietServerMaxS)
	}
	if rr.QuietServerOver5ms != -1 {
		t.Errorf("%d server requests over 5 ms without scrapes, want -1 (n/a)", rr.QuietServerOver5ms)
	}
	if quietWindow(w, 15*time.Second, t0.Add(8*time.Second)) != nil {
		t.Error("a control window reaching past the next swap (or the run's end)")
	}
}
