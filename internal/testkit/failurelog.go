package testkit

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// failureLogLines is how many of the newest lines a FailureLogger keeps.
const failureLogLines = 400

// FailureLogger is a logger whose lines are shown only if the test fails:
// it keeps the newest lines in memory and, at cleanup of a failed test,
// writes them to the test's output. A flaky failure on a busy CI machine
// then comes with what the component under test said, not only "timed out".
//
// Logging after the test ended is safe (the lines are kept, never written
// through t).
func FailureLogger(t testing.TB) *slog.Logger {
	r := &lineRing{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		lines, lost := r.snapshot()
		if lost > 0 {
			t.Logf("log (the newest %d lines; %d older left out):", len(lines), lost)
		} else {
			t.Logf("log (%d lines):", len(lines))
		}
		for _, l := range lines {
			t.Log(l)
		}
	})
	return slog.New(slog.NewTextHandler(r, nil))
}

// lineRing keeps the newest failureLogLines lines written to it.
type lineRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	lost  int
}

func (r *lineRing) Write(p []byte) (int, error) {
	l := string(bytes.TrimRight(p, "\n"))
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < failureLogLines {
		r.lines = append(r.lines, l)
		return len(p), nil
	}
	r.lines[r.next] = l
	r.next = (r.next + 1) % failureLogLines
	r.lost++
	return len(p), nil
}

func (r *lineRing) snapshot() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.lines))
	out = append(out, r.lines[r.next:]...)
	out = append(out, r.lines[:r.next]...)
	return out, r.lost
}
