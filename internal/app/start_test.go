package app

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
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
