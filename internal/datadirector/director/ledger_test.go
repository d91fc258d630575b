package director

import (
	"maps"
	"testing"
)

// Every transition of the ledger's contract (ledger.go), as steps on two
// partitions of one feed, with what must be pending for commit after each.
func TestLedgerTransitions(t *testing.T) {
	p0, p1 := tp{"SCP", 0}, tp{"SCP", 1}
	type step struct {
		op      string // assign, hand, confirm, revoke, lose, commit, reset
		k       tp
		a, b    int64  // assign: start; hand: first, next; confirm: last
		epoch   uint64 // confirm: the epoch the copies were handed in
		pending map[tp]int64
		// hand: want owned, gap, high; revoke: want the offset returned (-1: none)
		owned, gap bool
		high       int64
		revoked    int64
		current    map[tp]int64 // current-snapshot: what of the snapshot is still current
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"confirmed copies are pending until committed", []step{
			{op: "assign", k: p0, a: 100},
			{op: "hand", k: p0, a: 100, b: 150, owned: true, high: -1},
			{op: "confirm", k: p0, a: 149, epoch: 1, pending: map[tp]int64{p0: 150}},
			{op: "commit", pending: map[tp]int64{}},
			{op: "hand", k: p0, a: 150, b: 160, owned: true, high: 149},
			{op: "confirm", k: p0, a: 159, epoch: 1, pending: map[tp]int64{p0: 160}},
		}},
		{"confirmations only raise what is committed", []step{
			{op: "assign", k: p0, a: 0},
			{op: "confirm", k: p0, a: 49, epoch: 1, pending: map[tp]int64{p0: 50}},
			{op: "confirm", k: p0, a: 19, epoch: 1, pending: map[tp]int64{p0: 50}},
		}},
		{"a fetch past where the reader should go on is a gap", []step{
			{op: "assign", k: p0, a: 10},
			{op: "hand", k: p0, a: 25, b: 30, owned: true, gap: true, high: -1},
			{op: "hand", k: p0, a: 30, b: 40, owned: true, high: -1},
		}},
		{"an unknown start takes what the reader reads, no gap", []step{
			{op: "assign", k: p0, a: -1},
			{op: "hand", k: p0, a: 500, b: 510, owned: true, high: -1},
			{op: "hand", k: p0, a: 510, b: 520, owned: true, high: -1},
		}},
		{"a partition not assigned is not handed", []step{
			{op: "hand", k: p0, a: 0, b: 10, owned: false, high: -1},
			{op: "confirm", k: p0, a: 9, epoch: 0, pending: map[tp]int64{}},
		}},
		{"revoked mid-batch: the batch in flight is not committed", []step{
			{op: "assign", k: p0, a: 0},
			{op: "assign", k: p1, a: 0},
			{op: "hand", k: p0, a: 0, b: 10, owned: true, high: -1},
			{op: "hand", k: p1, a: 0, b: 10, owned: true, high: -1},
			{op: "confirm", k: p0, a: 4, epoch: 1, pending: map[tp]int64{p0: 5}},
			// p0 goes to another node: what was confirmed is returned
			// for the reader's last commit, and then forgotten.
			{op: "revoke", k: p0, revoked: 5, pending: map[tp]int64{}},
			// The rest of the batch handed before the revoke confirms now.
			{op: "confirm", k: p0, a: 9, epoch: 1, pending: map[tp]int64{}},
			{op: "confirm", k: p1, a: 9, epoch: 1, pending: map[tp]int64{p1: 10}},
		}},
		{"revoked and assigned back: the old epoch's batch is still not committed", []step{
			{op: "assign", k: p0, a: 0},
			{op: "hand", k: p0, a: 0, b: 10, owned: true, high: -1},
			{op: "revoke", k: p0, revoked: -1},
			// Another node read on to 40 and committed; p0 comes back.
			{op: "assign", k: p0, a: 40},
			{op: "confirm", k: p0, a: 9, epoch: 1, pending: map[tp]int64{}},
			{op: "hand", k: p0, a: 40, b: 45, owned: true, high: 9},
			{op: "confirm", k: p0, a: 44, epoch: 2, pending: map[tp]int64{p0: 45}},
		}},
		{"lost: nothing of it is committed", []step{
			{op: "assign", k: p0, a: 0},
			{op: "assign", k: p1, a: 0},
			{op: "confirm", k: p0, a: 9, epoch: 1},
			{op: "confirm", k: p1, a: 4, epoch: 1, pending: map[tp]int64{p0: 10, p1: 5}},
			{op: "lose", k: p0, pending: map[tp]int64{p1: 5}},
			{op: "revoke", k: p0, revoked: -1},
		}},
		{"a commit that lands after a revoke does not count for the next epoch", []step{
			{op: "assign", k: p0, a: 0},
			{op: "confirm", k: p0, a: 9, epoch: 1, pending: map[tp]int64{p0: 10}},
			{op: "snapshot"},
			{op: "revoke", k: p0, revoked: 10},
			{op: "assign", k: p0, a: 10},
			{op: "confirm", k: p0, a: 19, epoch: 2, pending: map[tp]int64{p0: 20}},
			{op: "commit-snapshot", pending: map[tp]int64{p0: 20}},
		}},
		{"lost and assigned back while a commit waited: its snapshot is void", []step{
			// A paused node's commit round took pending(), then waited
			// for the group's rejoin to prove its membership: proven in
			// the new generation, it must not write what the old epoch
			// confirmed (another node has committed past it).
			{op: "assign", k: p0, a: 0},
			{op: "assign", k: p1, a: 0},
			{op: "confirm", k: p0, a: 52, epoch: 1},
			{op: "confirm", k: p1, a: 9, epoch: 1, pending: map[tp]int64{p0: 53, p1: 10}},
			{op: "snapshot"},
			{op: "lose", k: p0},
			{op: "assign", k: p0, a: 1747},
			{op: "current-snapshot", current: map[tp]int64{p1: 10}},
		}},
		{"a new incarnation keeps only what was delivered", []step{
			{op: "assign", k: p0, a: 0},
			{op: "hand", k: p0, a: 0, b: 100, owned: true, high: -1},
			{op: "confirm", k: p0, a: 99, epoch: 1, pending: map[tp]int64{p0: 100}},
			{op: "reset", pending: map[tp]int64{}},
			{op: "assign", k: p0, a: 50},
			{op: "hand", k: p0, a: 50, b: 120, owned: true, high: 99},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			var snap map[tp]pendingCommit
			for i, s := range tc.steps {
				switch s.op {
				case "assign":
					l.assign(s.k, s.a)
				case "hand":
					h := l.hand(s.k, s.a, s.b)
					if h.owned != s.owned || h.gap != s.gap || h.high != s.high {
						t.Fatalf("step %d hand(%v, %d, %d) = owned %v gap %v high %d, want %v %v %d",
							i, s.k, s.a, s.b, h.owned, h.gap, h.high, s.owned, s.gap, s.high)
					}
				case "confirm":
					l.confirm(s.k, s.epoch, s.a, 0)
				case "revoke":
					c, ok := l.revoke(s.k)
					got := int64(-1)
					if ok {
						got = c.at
					}
					if got != s.revoked {
						t.Fatalf("step %d revoke(%v) = %d, want %d", i, s.k, got, s.revoked)
					}
				case "lose":
					l.lose(s.k)
				case "commit":
					l.committedUpTo(l.pending())
				case "snapshot":
					snap = l.pending()
				case "commit-snapshot":
					l.committedUpTo(snap)
				case "current-snapshot":
					got := map[tp]int64{}
					for k, c := range l.current(maps.Clone(snap)) {
						got[k] = c.at
					}
					if !maps.Equal(got, s.current) {
						t.Fatalf("step %d current(%v) = %v, want %v", i, snap, got, s.current)
					}
				case "reset":
					l.reset()
				}
				if s.pending != nil {
					got := map[tp]int64{}
					for k, c := range l.pending() {
						got[k] = c.at
					}
					if !maps.Equal(got, s.pending) {
						t.Fatalf("step %d (%s): pending %v, want %v", i, s.op, got, s.pending)
					}
				}
			}
		})
	}
}

// A commit never falls inside the copies of a transaction emitted lately:
// from there a new owner would read its later copies without the earlier.
func TestOutsideEmittedSpans(t *testing.T) {
	spans := [][2]int64{{100, 130}, {125, 160}, {200, 210}}
	for _, tc := range []struct{ at, want int64 }{
		{90, 90}, {100, 100}, {101, 100}, {131, 100}, {160, 100}, {161, 161}, {205, 200}, {211, 211},
	} {
		if got := outside(tc.at, spans); got != tc.want {
			t.Errorf("outside(%d) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

// A partition kept across a new membership is moved to where assigned
// started it only while it is still owned in that epoch: lost and assigned
// again before the reader got to it, its old start (the commit as of the
// rejoin) would move the reader back, and franz-go's next commit with it.
func TestRepositionsOnlyOfTheirEpoch(t *testing.T) {
	l := newLedger()
	p0, p1, p2, p3, p4 := tp{"SCP", 0}, tp{"SCP", 1}, tp{"SCP", 2}, tp{"SCP", 3}, tp{"SCP", 4}
	l.keep(p0, l.assign(p0, 160))
	l.keep(p1, l.assign(p1, 171))
	l.keep(p2, l.assign(p2, -1)) // no commit, no log start: the cursor stays
	e3 := l.assign(p3, 30)
	l.assign(p4, 40) // assigned, not kept: no reposition
	l.lose(p1)
	l.assign(p1, 2048) // another node committed 2048 meanwhile
	l.assign(p3, 300)
	l.keep(p3, e3) // too late: p3 is in a later epoch
	got := l.takeRepositions()
	if want := map[tp]int64{p0: 160}; !maps.Equal(got, want) {
		t.Fatalf("repositions %v, want %v", got, want)
	}
	if again := l.takeRepositions(); len(again) != 0 {
		t.Fatalf("taken twice: %v", again)
	}
}
