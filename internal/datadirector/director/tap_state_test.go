package director

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The tap's transitions, fed as its state loop is: no Kafka, no reader.

// newTapState is an empty tap state with two member feeds, a and b.
func newTapState(t *testing.T) (*tapState, *tapMember, *tapMember, chan struct{}) {
	t.Helper()
	m := offlineManager(t)
	kick := make(chan struct{}, 1)
	s := &tapState{parts: map[tp]bool{}, partsCh: make(chan struct{}), pos: map[tp]int64{}, kick: kick}
	mem := func(name string) *tapMember {
		f := m.newFeed(runPlan{FeedSpec: FeedSpec{Name: name, Type: TypeSynthetic}})
		return &tapMember{f: f, evicted: make(chan struct{}), gone: make(chan struct{})}
	}
	a, b := mem("a"), mem("b")
	s.members = []*tapMember{a, b}
	return s, a, b, kick
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTapStatePokeEndsThePollAndWakesTheReader(t *testing.T) {
	s, _, _, kick := newTapState(t)
	woken := false
	s.wake = func() { woken = true }
	s.poke()
	s.poke() // the kick is pending already: a second must not block
	if kicked := closed(kick); !s.rewind || !woken || !kicked {
		t.Fatalf("after a poke: rewind %v, poll ended %v, reader kicked %v; want all", s.rewind, woken, kicked)
	}
}

func TestTapStateAssignedUnderANewMemberForgetsConfirmations(t *testing.T) {
	s, a, b, _ := newTapState(t)
	changed := s.partsCh
	if kept := s.assigned("m1", map[string][]int32{"SCP": {0, 1}}); kept != 0 {
		t.Fatalf("first assignment: %d partitions kept, want 0", kept)
	}
	if !closed(changed) || !s.parts[tp{"SCP", 0}] || !s.parts[tp{"SCP", 1}] || s.rewind {
		t.Fatalf("first assignment: parts %v, change told %v, rewind %v", s.parts, closed(changed), s.rewind)
	}
	ea := a.f.led.assign(tp{"SCP", 0}, 0)
	a.f.led.confirm(tp{"SCP", 0}, ea, 9, 0)
	eb := b.f.led.assign(tp{"SCP", 1}, 0)
	b.f.led.confirm(tp{"SCP", 1}, eb, 4, 0)

	// The same member adds a partition: what was confirmed stays.
	s.assigned("m1", map[string][]int32{"SCP": {2}})
	if len(a.f.led.pending()) != 1 || len(b.f.led.pending()) != 1 || s.rewind {
		t.Fatalf("same member: pending %v and %v, rewind %v; want both kept, no rewind", a.f.led.pending(), b.f.led.pending(), s.rewind)
	}
	// A new member id keeping the partitions: the group dropped the old
	// member, another node may have read and committed them since.
	if kept := s.assigned("m2", map[string][]int32{"SCP": {3}}); kept != 3 {
		t.Fatalf("new member: %d partitions positioned again, want 3", kept)
	}
	if len(a.f.led.pending()) != 0 || len(b.f.led.pending()) != 0 || !s.rewind || s.member != "m2" {
		t.Fatalf("new member: pending %v and %v, rewind %v, member %q; want nothing pending, a rewind, m2",
			a.f.led.pending(), b.f.led.pending(), s.rewind, s.member)
	}
}

func TestTapStateEvictAndAttach(t *testing.T) {
	s, a, b, _ := newTapState(t)
	first := a.evicted
	if !s.evict(a) || !closed(first) || !a.detached {
		t.Fatal("the first eviction did not detach the member")
	}
	if s.evict(a) {
		t.Fatal("a detached member was evicted twice")
	}
	if got := s.attached(); len(got) != 1 || got[0] != b {
		t.Fatalf("attached = %v, want b only", got)
	}
	s.attach(a)
	if a.detached || closed(a.evicted) || !s.rewind || len(s.attached()) != 2 {
		t.Fatalf("attached again: detached %v, evicted %v, rewind %v", a.detached, closed(a.evicted), s.rewind)
	}
	if !s.evict(a) {
		t.Fatal("a member attached again could not be evicted again")
	}
	b.leaving = true
	if got := s.attached(); len(got) != 0 {
		t.Fatalf("attached = %v, want none: a is detached, b leaving", got)
	}
	if !s.remove(b) || !closed(b.gone) || s.remove(b) || s.evict(b) {
		t.Fatal("a member removed: gone closed once, then neither removed nor evicted again")
	}
}

func TestTapStateMovesBackOnlyWhereItReads(t *testing.T) {
	s, _, _, _ := newTapState(t)
	s.assigned("m1", map[string][]int32{"SCP": {0, 1}})
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "SCP", Partitions: []kgo.FetchPartition{
		{Partition: 0, Records: []*kgo.Record{{Offset: 10}, {Offset: 11}}},
		{Partition: 1, Records: []*kgo.Record{{Offset: 5}}},
		{Partition: 7, Records: []*kgo.Record{{Offset: 50}}}, // not held here
	}}}}}
	s.polled(fs)
	if want := map[tp]int64{{"SCP", 0}: 12, {"SCP", 1}: 6}; !maps.Equal(s.pos, want) {
		t.Fatalf("after a poll: positions %v, want %v", s.pos, want)
	}
	to := map[tp]int64{{"SCP", 0}: 3, {"SCP", 1}: 6, {"SCP", 7}: 1}
	s.moveBack(to)
	if want := map[tp]int64{{"SCP", 0}: 3}; !maps.Equal(to, want) || s.pos[tp{"SCP", 0}] != 3 {
		t.Fatalf("move back: %v (positions %v), want only %v: SCP/1 is not behind, SCP/7 not held", to, s.pos, want)
	}
	changed := s.partsCh
	s.clear()
	if len(s.parts) != 0 || len(s.pos) != 0 || !closed(changed) {
		t.Fatalf("after the reader stopped: parts %v, positions %v", s.parts, s.pos)
	}
}

// An ended tap runs nothing more: a feed leaving after it is not held.
func TestTapDoAfterTheTapEnded(t *testing.T) {
	tp0 := offlineManager(t).newTap("SCP", []string{"SCP"})
	ran := false
	if !tp0.do(func(*tapState) { ran = true }) || !ran {
		t.Fatal("a running tap did not run its state loop's work")
	}
	close(tp0.quit)
	ran = false
	if tp0.do(func(*tapState) { ran = true }) || ran {
		t.Fatal("an ended tap ran work")
	}
	parts, ch := tp0.assignment()
	if parts != nil || ch != nil || tp0.client() != nil {
		t.Fatal("an ended tap reported partitions or a client")
	}
	tp0.leave(&tapMember{t: tp0, gone: make(chan struct{})})
}
