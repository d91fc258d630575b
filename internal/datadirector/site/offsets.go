package site

import "sync"

// offsetMap maps one partition's origin offsets to the offsets their mirrored
// copies got in the peer's topic, as runs: the mirror produces a partition's
// copies in order, one producer per partition, so consecutive copies land on
// consecutive offsets, and a run breaks only where the origin skips offsets
// (a transaction's control records, copies aborted in a transaction).
type offsetMap struct {
	mu   sync.Mutex
	runs []run // ascending in origin and in dest
}

// run is n copies: origin offsets origin..origin+n-1 at dest..dest+n-1.
type run struct{ origin, dest, n int64 }

// maxRuns bounds a partition's map; the oldest runs go first. A position
// older than the map is answered "unknown", and the caller keeps what it had.
const maxRuns = 4096

// add records that the copy at origin offset origin landed at dest.
func (m *offsetMap) add(origin, dest int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := len(m.runs); k > 0 {
		last := &m.runs[k-1]
		if origin == last.origin+last.n && dest == last.dest+last.n {
			last.n++
			return
		}
		if origin < last.origin+last.n || dest < last.dest+last.n {
			// A restart re-seeded below what is known: start over
			// from here rather than keep runs out of order.
			m.runs = m.runs[:0]
		}
	}
	if len(m.runs) == maxRuns {
		m.runs = append(m.runs[:0], m.runs[maxRuns/4:]...)
	}
	m.runs = append(m.runs, run{origin, dest, 1})
}

// destOf is where, in the peer's topic, a reader positioned at origin
// offset next (the next copy to read) goes on: the offset of the first
// mirrored copy whose origin offset is next or later. Past the last copy
// mirrored, it is the offset the next one will get.
func (m *offsetMap) destOf(next int64) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.runs) == 0 || next < m.runs[0].origin {
		return 0, false
	}
	for _, r := range m.runs {
		switch {
		case next < r.origin: // in a gap before r
			return r.dest, true
		case next < r.origin+r.n:
			return r.dest + next - r.origin, true
		}
	}
	last := m.runs[len(m.runs)-1]
	return last.dest + last.n, true
}

// originOf is the inverse: a reader of the peer's topic positioned at dest
// offset next goes on, in the origin topic, at the origin offset of the copy
// at next; past the last copy mirrored, after the last copy's origin.
func (m *offsetMap) originOf(next int64) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.runs) == 0 || next < m.runs[0].dest {
		return 0, false
	}
	for _, r := range m.runs {
		switch {
		case next < r.dest:
			return r.origin, true
		case next < r.dest+r.n:
			return r.origin + next - r.dest, true
		}
	}
	last := m.runs[len(m.runs)-1]
	return last.origin + last.n, true
}
