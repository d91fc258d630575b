package site

import "testing"

func TestOffsetMap(t *testing.T) {
	var m offsetMap
	if _, ok := m.destOf(0); ok {
		t.Fatal("an empty map knows nothing")
	}
	// Origin 10..14 at 100..104; the origin skips 15 and 16 (a
	// transaction's control record and an aborted copy); 17..18 at 105..106.
	for o := int64(10); o < 15; o++ {
		m.add(o, 90+o)
	}
	m.add(17, 105)
	m.add(18, 106)
	if len(m.runs) != 2 {
		t.Fatalf("runs %+v, want 2", m.runs)
	}
	for _, c := range []struct {
		origin, dest int64
		ok           bool
	}{
		{9, 0, false}, // older than the map
		{10, 100, true},
		{14, 104, true},
		{15, 105, true}, // in the gap: the next mirrored copy
		{16, 105, true},
		{18, 106, true},
		{19, 107, true}, // past the last: where the next will land
		{40, 107, true},
	} {
		d, ok := m.destOf(c.origin)
		if ok != c.ok || ok && d != c.dest {
			t.Errorf("destOf(%d) = %d, %v; want %d, %v", c.origin, d, ok, c.dest, c.ok)
		}
	}
	for _, c := range []struct {
		dest, origin int64
		ok           bool
	}{
		{99, 0, false},
		{100, 10, true},
		{104, 14, true},
		{105, 17, true},
		{106, 18, true},
		{107, 19, true},
	} {
		o, ok := m.originOf(c.dest)
		if ok != c.ok || ok && o != c.origin {
			t.Errorf("originOf(%d) = %d, %v; want %d, %v", c.dest, o, ok, c.origin, c.ok)
		}
	}
	// A restart seeds the map from the peer's last copy again: what is
	// below it is forgotten rather than kept out of order.
	m.add(12, 102)
	if o, ok := m.originOf(102); !ok || o != 12 || len(m.runs) != 1 {
		t.Fatalf("after a re-seed: %+v", m.runs)
	}
	// Bounded.
	for i := range int64(3 * maxRuns) {
		m.add(1000+2*i, 5000+i)
	}
	if len(m.runs) > maxRuns {
		t.Fatalf("%d runs kept, want at most %d", len(m.runs), maxRuns)
	}
}
