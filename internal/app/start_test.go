package app

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestStartFailureIsAnError: a listener that cannot be opened makes Start
// return an error naming it, having released what it had opened (the store,
// so a second Start on the same data directory works), not panic.
func TestStartFailureIsAnError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := testConfig(t, dir, false)
	cfg.CURRIAddr = busy.Addr().String()
	s, err := Start(context.Background(), cfg, io.Discard)
	if err == nil || s != nil || !strings.Contains(err.Error(), "curri listener") {
		t.Fatalf("Start with a busy CURRI port: %v, %v", s, err)
	}
	cfg.CURRIAddr = "127.0.0.1:0"
	s, err = Start(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatalf("second Start on the same data directory: %v", err)
	}
	if err := s.Shutdown(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// stuckListener is a listener whose Shutdown does not finish in time.
type stuckListener struct{ closed bool }

func (l *stuckListener) Shutdown(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (l *stuckListener) Close() error { l.closed = true; return nil }

// TestShutdownListenersBothTimeOut: when both listeners outlast the
// shutdown timeout, both errors come back and both are closed; run under
// -race, which catches the two shutdowns writing the errors at once.
func TestShutdownListenersBothTimeOut(t *testing.T) {
	a, b := &stuckListener{}, &stuckListener{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	errs := shutdownListeners(ctx, []httpListener{a, b})
	if len(errs) != 2 || !a.closed || !b.closed {
		t.Fatalf("errors %v, closed %v %v; want two errors and both closed", errs, a.closed, b.closed)
	}
	for _, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want the deadline", err)
		}
	}
}
