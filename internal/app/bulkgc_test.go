package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func gogc(t *testing.T) int {
	t.Helper()
	g := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(g)
	return int(g[0].Value.Uint64())
}

// tightenGC lowers GOGC to bulkGCPercent while any bulk work runs and
// restores the configured value when the last one ends; a GOGC already
// at or below it is left alone.
func TestTightenGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	var s Server
	undoA := s.tightenGC()
	if got := gogc(t); got != bulkGCPercent {
		t.Fatalf("during bulk work: GOGC %d, want %d", got, bulkGCPercent)
	}
	undoB := s.tightenGC() // the compile beside the store write
	undoA()
	if got := gogc(t); got != bulkGCPercent {
		t.Fatalf("one of two done: GOGC %d, want %d", got, bulkGCPercent)
	}
	undoB()
	if got := gogc(t); got != 100 {
		t.Fatalf("after bulk work: GOGC %d, want 100", got)
	}

	debug.SetGCPercent(30)
	undo := s.tightenGC()
	if got := gogc(t); got != 30 {
		t.Errorf("GOGC 30 during bulk work: %d", got)
	}
	undo()
	if got := gogc(t); got != 30 {
		t.Errorf("GOGC 30 after bulk work: %d", got)
	}

	// s.bulk restores it even when the work panics (net/http recovers).
	debug.SetGCPercent(200)
	func() {
		defer func() { _ = recover() }()
		s.bulk(func() { panic("boom") })
	}()
	if got := gogc(t); got != 200 {
		t.Errorf("after a panicking bulk: GOGC %d, want 200", got)
	}
}

// addBulkP adds a P per bulk worker and restores GOMAXPROCS when the last
// one ends: the operator's value if GOMAXPROCS was set in the environment.
func TestAddBulkP(t *testing.T) {
	orig := runtime.GOMAXPROCS(3)
	defer runtime.GOMAXPROCS(orig)
	s := Server{ownProcs: true}
	undoA := s.addBulkP()
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("one bulk worker: GOMAXPROCS %d, want 4", got)
	}
	undoB := s.addBulkP()
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Fatalf("two bulk workers: GOMAXPROCS %d, want 5", got)
	}
	undoA()
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("one left: GOMAXPROCS %d, want 4", got)
	}
	undoB()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("after bulk work: GOMAXPROCS %d, want 3", got)
	}
	// Without an operator's GOMAXPROCS, the runtime's default comes back.
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	s = Server{}
	undo := s.addBulkP()
	if got := runtime.GOMAXPROCS(0); got != def+1 {
		t.Fatalf("bulk worker: GOMAXPROCS %d, want %d", got, def+1)
	}
	undo()
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("after bulk work: GOMAXPROCS %d, want the default %d", got, def)
	}
}
