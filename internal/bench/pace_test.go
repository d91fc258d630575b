package bench

import (
	"context"
	"testing"
	"time"
)

func testPaces() []string {
	if preciseTimers {
		return []string{pacePrecise, paceRuntime}
	}
	return []string{paceRuntime}
}

// Neither pacer wakes a call before it is due, and each re-arms for every
// wait.
func TestPacerWaitsUntilDue(t *testing.T) {
	for _, pace := range testPaces() {
		t.Run(pace, func(t *testing.T) {
			p, err := newPacer(t.Context(), pace)
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond, 7 * time.Millisecond} {
				due := time.Now().Add(d)
				if err := p.wait(due); err != nil {
					t.Fatalf("wait %v: %v", d, err)
				}
				if now := time.Now(); now.Before(due) {
					t.Errorf("wait %v returned %v early", d, due.Sub(now))
				}
			}
			start := time.Now()
			for i := 1; i <= 200; i++ {
				due := start.Add(time.Duration(i) * 100 * time.Microsecond)
				if err := p.wait(due); err != nil {
					t.Fatal(err)
				}
				if time.Now().Before(due) {
					t.Fatalf("wait %d returned early", i)
				}
			}
		})
	}
}

// A wait ends, with an error, when the run's context does.
func TestPacerCancelled(t *testing.T) {
	for _, pace := range testPaces() {
		t.Run(pace, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			p, err := newPacer(ctx, pace)
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			done := make(chan error, 1)
			go func() { done <- p.wait(time.Now().Add(time.Hour)) }()
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a cancelled wait returned no error")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a wait did not end with its context")
			}
		})
	}
}

func TestResolvePace(t *testing.T) {
	for _, c := range []struct {
		pace string
		rate int
		want string
	}{
		{paceAuto, 5000, pacePrecise},
		{paceAuto, paceAutoRate - 1, pacePrecise},
		{paceAuto, paceAutoRate, paceRuntime},
		{paceAuto, 15000, paceRuntime},
		{pacePrecise, 15000, pacePrecise},
		{paceRuntime, 100, paceRuntime},
	} {
		want := c.want
		if !preciseTimers && want == pacePrecise {
			want = paceRuntime
			if c.pace == pacePrecise {
				want = "" // an error
			}
		}
		got, err := resolvePace(c.pace, c.rate)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("resolvePace(%q, %d) = %q, %v; want %q", c.pace, c.rate, got, err, want)
		}
	}
	if _, err := resolvePace("fast", 100); err == nil {
		t.Error("-pace fast was accepted")
	}
}
