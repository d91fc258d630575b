package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
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

// TestSupervisorStopsInReverse: the parts stop the last started first,
// each waited for; and once stopped, nothing is left to stop.
func TestSupervisorStopsInReverse(t *testing.T) {
	sv := newSupervisor(context.Background(), slog.New(slog.DiscardHandler))
	var order []string
	sv.closer("store", func() { order = append(order, "store") })
	sv.loop("loop", func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		order = append(order, "loop")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	sv.add("listener", func(ctx context.Context) error {
		order = append(order, "listener")
		return shutdownListener(ctx, srv, ln)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sv.stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	if got := strings.Join(order, ","); got != "listener,loop,store" {
		t.Errorf("stopped in order %s, want listener,loop,store", got)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener's socket is still open")
	}
	if err := sv.stop(ctx); err != nil {
		t.Errorf("a second stop: %v (nothing is left to stop)", err)
	}
}

// TestSupervisorTimeout: a part that outlasts the shutdown timeout (a
// listener whose requests do not finish, a loop that does not return) is
// named in the error, the listener is closed, and the parts started before
// still stop.
func TestSupervisorTimeout(t *testing.T) {
	sv := newSupervisor(context.Background(), slog.New(slog.DiscardHandler))
	closed := false
	sv.closer("store", func() { closed = true })
	release := make(chan struct{})
	defer close(release)
	sv.loop("stuck loop", func(ctx context.Context) { <-release })
	stuck := &stuckListener{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sv.add("listener", func(ctx context.Context) error { return shutdownListener(ctx, stuck, ln) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = sv.stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "stuck loop: still running") || !strings.Contains(err.Error(), "listener: context deadline exceeded") {
		t.Errorf("stop: %v; want the stuck loop and the listener named", err)
	}
	if !stuck.closed || !closed {
		t.Errorf("closed: listener %v, store %v; want both", stuck.closed, closed)
	}
}
