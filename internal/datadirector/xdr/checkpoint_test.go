package xdr

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Open names every copy of the transactions still pending, and reading
// those copies again into a reset correlator makes the same records.
func TestOpenAndReset(t *testing.T) {
	x, ck, _ := newTest(t, Config{Timeout: time.Second, TrackOffsets: true})
	a, b := scp4("a", 200), scp4("b", 200)
	var out []Record
	off := int64(0)
	add := func(c0 int, cs ...int) {
		for _, i := range cs {
			c := a[i]
			if c0 == 1 {
				c = b[i]
			}
			out = x.AddFrom(c, 3, off, out)
			off++
		}
	}
	add(0, 0, 1) // a: offsets 0, 1
	add(1, 0)    // b: 2
	add(0, 2, 3) // a completes: 3, 4
	add(1, 1)    // b: 5
	if len(out) != 1 || out[0].CorrelationID != "a" {
		t.Fatalf("records %v, want a", out)
	}
	var open []int64
	x.Open(func(src uint32, o int64) {
		if src != 3 {
			t.Errorf("source %d", src)
		}
		open = append(open, o)
	})
	slices.Sort(open)
	if fmt.Sprint(open) != "[2 5]" {
		t.Fatalf("open copies %v, want b's at 2 and 5", open)
	}
	x.Reset()
	if x.Pending() != 0 {
		t.Fatalf("%d pending after reset", x.Pending())
	}
	// Replayed from the checkpoint: b's two copies, then its last two.
	out = x.AddFrom(b[0], 3, 2, out[:0])
	out = x.AddFrom(b[1], 3, 5, out)
	out = x.AddFrom(b[2], 3, 6, out)
	out = x.AddFrom(b[3], 3, 7, out)
	if len(out) != 1 || out[0].CorrelationID != "b" || out[0].Result != "complete" {
		t.Fatalf("after the replay: %+v", out)
	}
	// a's tombstone went with the reset: a copy of a opens a transaction.
	out = x.AddFrom(a[0], 3, 8, out[:0])
	if x.Pending() != 1 {
		t.Fatalf("%d pending, want a again", x.Pending())
	}
	ck.add(2 * time.Second)
	if out = x.Expire(ck.Now(), out); len(out) != 1 {
		t.Fatalf("expired %d", len(out))
	}
	// Without TrackOffsets, Open names nothing.
	y, _, _ := newTest(t, Config{})
	y.AddFrom(a[0], 1, 1, nil)
	y.Open(func(uint32, int64) { t.Error("Open without TrackOffsets named a copy") })
}
