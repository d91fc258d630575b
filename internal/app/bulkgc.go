package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// bulkGCPercent is the GOGC in force while a bulk rule replacement is
// decoded, stored and compiled, unless GOGC is lower or off.
//
// A 100,000-rule replacement holds ~114 MB live at its peak (the old and
// the new compiled policy, the 100,000 decoded rules, the store's work):
// at GOGC=100 the heap arena grew to ~225 MiB and the server's RSS to
// 301-315 MB (the ceiling is 300). At 50 the arena peaked at ~195
// MiB and the RSS at 252-276 MB (BENCHMARKS.md, fourth CURRI round), for
// a few more GC cycles in the ~2 s of the replacement only. Steady state
// keeps the configured GOGC.
const bulkGCPercent = 50

// tightenGC lowers GOGC to bulkGCPercent until the returned function is
// called; overlapping bulk work (the API's store write and the compile
// beside it) shares one lowering, undone when the last one ends.
func (s *Server) tightenGC() (undo func()) {
	s.bulkMu.Lock()
	defer s.bulkMu.Unlock()
	if s.bulkRunning == 0 {
		g := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(g)
		s.gcPercent = -1 // off or unknown: left alone
		if g[0].Value.Kind() == metrics.KindUint64 {
			if p := int(g[0].Value.Uint64()); p > bulkGCPercent {
				s.gcPercent = p
				debug.SetGCPercent(bulkGCPercent)
			}
		}
	}
	s.bulkRunning++
	return func() {
		s.bulkMu.Lock()
		defer s.bulkMu.Unlock()
		s.bulkRunning--
		if s.bulkRunning == 0 && s.gcPercent > 0 {
			debug.SetGCPercent(s.gcPercent)
		}
	}
}

// bulk runs a part of a bulk rule replacement (the API's, as
// api.Config.Bulk, and the compile beside it) with the GC tightened and a
// P of its own.
func (s *Server) bulk(work func()) {
	defer s.tightenGC()()
	defer s.addBulkP()()
	work()
}

// addBulkP raises GOMAXPROCS by one until the returned function is called,
// so that bulk rule work (the API's store write, the compile beside it)
// leaves the calls as many Ps as they had; the kernel shares the cores.
//
// Bulk loops yield with runtime.Gosched, but the scheduler polls the
// network only when it finds no runnable goroutine: with bulk work on
// every P (store write and compile on two cores) each Gosched hands the P
// to the other bulk goroutine, and a call whose request has arrived waits
// for sysmon's poll (up to 10 ms), then in the global run queue behind
// them. An execution trace of a 100k replacement (bench curri, 2 cores)
// showed exactly that: calls runnable for 10-20 ms while two bulk
// goroutines alternated on both Ps. With a spare P, an idle P blocks in
// netpoll and a call runs as soon as its request arrives, the kernel
// dividing the two cores between it and the bulk threads.
func (s *Server) addBulkP() (undo func()) {
	s.bulkMu.Lock()
	defer s.bulkMu.Unlock()
	if s.bulkProcs == 0 {
		s.baseProcs = runtime.GOMAXPROCS(0)
	}
	s.bulkProcs++
	runtime.GOMAXPROCS(s.baseProcs + s.bulkProcs)
	return func() {
		s.bulkMu.Lock()
		defer s.bulkMu.Unlock()
		s.bulkProcs--
		switch {
		case s.bulkProcs > 0:
			runtime.GOMAXPROCS(s.baseProcs + s.bulkProcs)
		case s.ownProcs:
			runtime.GOMAXPROCS(s.baseProcs)
		default:
			// Setting GOMAXPROCS stopped the runtime's automatic
			// updates (cgroup quota changes); this resumes them.
			runtime.SetDefaultGOMAXPROCS()
		}
	}
}
