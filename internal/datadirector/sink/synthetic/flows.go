package synthetic

import "encoding/binary"

// flowTable is the encoder's table of open TCP flows: fully associative, so
// it holds every flow up to its capacity (EncoderOptions.MaxFlows) and
// pushes one out only when full, the least recently used. A flow costs its
// slot (96 bytes, grown as flows appear) and two entries of the index
// (8 bytes, made at once): 10.6 MB with 100,000 flows open (the default).
//
// The index is open addressing with linear probing and backward-shift
// deletion, so a table that churns at capacity neither allocates nor
// slows with tombstones (a Go map did both: 15 % slower, 100 B a copy).
type flowTable struct {
	max   int
	index []int32 // slot numbers, -1 empty; a power of two ≥ 2·max
	mask  uint64
	n     int        // flows held
	slots []flowSlot // grows to max
	free  []int32    // slots of flows closed other than by eviction
	// The least recently used list, by slot number: head is the flow of
	// the last copy, tail the next to push out; -1 when empty.
	head, tail int32
}

// flowSlot is one flow of the table.
type flowSlot struct {
	key        flowKey
	st         flowState
	prev, next int32 // the least recently used list
}

func newFlowTable(max int) *flowTable {
	size := 2
	for size < 2*max {
		size <<= 1
	}
	t := &flowTable{max: max, index: make([]int32, size), mask: uint64(size - 1), head: -1, tail: -1}
	for i := range t.index {
		t.index[i] = -1
	}
	return t
}

// hashFlow spreads a flow's addresses and ports over 64 bits.
func hashFlow(key flowKey) uint64 {
	c, v := key.client.Addr().As16(), key.server.Addr().As16()
	le := binary.LittleEndian
	h := (le.Uint64(c[:8]) ^ le.Uint64(c[8:])*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	h = (h ^ le.Uint64(v[:8]) ^ le.Uint64(v[8:])*0xc4ceb9fe1a85ec53) * 0x9e3779b97f4a7c15
	h = (h ^ uint64(key.client.Port())<<16 ^ uint64(key.server.Port())) * 0xff51afd7ed558ccd
	return h ^ h>>29
}

// lookup is where key is in the index, or the empty position it would go.
func (t *flowTable) lookup(key flowKey) (pos uint64, found bool) {
	for pos = hashFlow(key) & t.mask; ; pos = (pos + 1) & t.mask {
		i := t.index[pos]
		if i < 0 {
			return pos, false
		}
		if t.slots[i].key == key {
			return pos, true
		}
	}
}

// find returns key's slot if the table holds its flow, and makes it the
// most recently used.
func (t *flowTable) find(key flowKey) *flowSlot {
	pos, ok := t.lookup(key)
	if !ok {
		return nil
	}
	i := t.index[pos]
	t.touch(i)
	return &t.slots[i]
}

// full reports whether a new flow needs another pushed out first (victim).
func (t *flowTable) full() bool { return len(t.free) == 0 && len(t.slots) >= t.max }

// victim is the least recently used flow.
func (t *flowTable) victim() *flowSlot { return &t.slots[t.tail] }

// add opens key's flow in a free slot (the table must not be full) as the
// most recently used.
func (t *flowTable) add(key flowKey, st flowState) *flowSlot {
	var i int32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else {
		t.slots = append(t.slots, flowSlot{})
		i = int32(len(t.slots) - 1)
	}
	t.slots[i] = flowSlot{key: key, st: st, prev: -1, next: -1}
	pos, _ := t.lookup(key)
	t.index[pos] = i
	t.n++
	t.link(i)
	return &t.slots[i]
}

// remove forgets slot's flow and frees the slot.
func (t *flowTable) remove(slot *flowSlot) {
	pos, ok := t.lookup(slot.key)
	if !ok {
		return
	}
	i := t.index[pos]
	t.unindex(pos)
	t.n--
	t.unlink(i)
	t.slots[i] = flowSlot{}
	t.free = append(t.free, i)
}

// unindex empties index position pos, moving back the entries after it
// that probed past it, so that every lookup still finds its key.
func (t *flowTable) unindex(pos uint64) {
	for j := (pos + 1) & t.mask; ; j = (j + 1) & t.mask {
		i := t.index[j]
		if i < 0 {
			break
		}
		home := hashFlow(t.slots[i].key) & t.mask
		// The entry at j may move to pos unless its home lies cyclically
		// in (pos, j].
		if (j-home)&t.mask >= (j-pos)&t.mask {
			t.index[pos] = i
			pos = j
		}
	}
	t.index[pos] = -1
}

// reset forgets every flow.
func (t *flowTable) reset() {
	for i := range t.index {
		t.index[i] = -1
	}
	t.slots, t.free, t.head, t.tail, t.n = t.slots[:0], t.free[:0], -1, -1, 0
}

func (t *flowTable) touch(i int32) {
	if t.head != i {
		t.unlink(i)
		t.link(i)
	}
}

// link puts slot i at the head of the list.
func (t *flowTable) link(i int32) {
	s := &t.slots[i]
	s.prev, s.next = -1, t.head
	if t.head >= 0 {
		t.slots[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func (t *flowTable) unlink(i int32) {
	s := &t.slots[i]
	if s.prev >= 0 {
		t.slots[s.prev].next = s.next
	} else {
		t.head = s.next
	}
	if s.next >= 0 {
		t.slots[s.next].prev = s.prev
	} else {
		t.tail = s.prev
	}
	s.prev, s.next = -1, -1
}
