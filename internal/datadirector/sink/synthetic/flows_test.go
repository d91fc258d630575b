package synthetic

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestFlowTableAgainstAMap: random opens, finds and closes in a small
// table (many collisions, index wrapping round) agree with a Go map, and
// the least recently used list stays whole.
func TestFlowTableAgainstAMap(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	const max = 64
	tb := newFlowTable(max)
	ref := map[flowKey]uint32{}
	key := func(n int) flowKey {
		return flowKey{netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}), uint16(n%7)),
			netip.MustParseAddrPort("10.200.0.1:8080")}
	}
	for op := range 200_000 {
		k := key(rnd.IntN(300))
		switch rnd.IntN(3) {
		case 0: // find
			s := tb.find(k)
			if want, ok := ref[k]; ok != (s != nil) || ok && s.st.conn != want {
				t.Fatalf("op %d: find %v = %v, want %v %v", op, k, s, want, ok)
			}
		case 1: // open
			if tb.find(k) != nil {
				continue
			}
			if tb.full() {
				v := tb.victim()
				delete(ref, v.key)
				tb.remove(v)
			}
			tb.add(k, flowState{conn: uint32(op)})
			ref[k] = uint32(op)
		case 2: // close
			if s := tb.find(k); s != nil {
				tb.remove(s)
				delete(ref, k)
			}
		}
		if tb.n != len(ref) {
			t.Fatalf("op %d: table holds %d, map %d", op, tb.n, len(ref))
		}
	}
	seen := 0
	for i := tb.head; i >= 0; i = tb.slots[i].next {
		if _, ok := ref[tb.slots[i].key]; !ok {
			t.Fatalf("list holds %v, which is closed", tb.slots[i].key)
		}
		seen++
	}
	if seen != len(ref) {
		t.Fatalf("list of %d flows, %d open", seen, len(ref))
	}
}
