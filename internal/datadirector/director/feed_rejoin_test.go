package director

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestFeedRejoinedAsNewMemberStartsFromCommits: a feed reading on its own
// whose group member is dropped while it rejoins (a heartbeat answered
// REBALANCE_IN_PROGRESS, then its join UNKNOWN_MEMBER_ID: what a node paused
// past its session timeout can meet) is made a new member by franz-go,
// which keeps the partitions the new assignment gives back, and its cursor
// in them, without a lost-partitions callback. The feed must start those
// partitions again in its ledger from their commits (another node may have
// committed past them meanwhile): every copy is delivered, and the group's
// commits never move backwards.
func TestFeedRejoinedAsNewMemberStartsFromCommits(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	r := newReceiver(t)
	h := newHarness(t, c, func(cfg *Config) { cfg.SessionTimeout = c.session; cfg.SoloReads = true })
	h.run(FeedSpec{Name: "s", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}})
	group := h.m.cfg.GroupPrefix + "s"

	pcl := producer(t, c)
	produce(t, pcl, "j", 0, 1000, 0)
	testkit.WaitFor(t, 20*time.Second, "the first copies delivered", func() bool { return len(r.missing("j", 1000)) == 0 })
	epochs := func() (lo uint64) {
		h.m.rmu.Lock()
		led := h.m.ledgers["s"]
		h.m.rmu.Unlock()
		led.mu.Lock()
		defer led.mu.Unlock()
		lo = ^uint64(0)
		for _, s := range led.parts {
			if s.owned {
				lo = min(lo, s.epoch)
			}
		}
		if len(led.parts) < 6 {
			return 0
		}
		return lo
	}
	if e := epochs(); e != 1 {
		t.Fatalf("before the rejoin: lowest epoch %d of the owned partitions, want 1", e)
	}
	watch := watchCommits(h.m, group)

	var heartbeat, join atomic.Bool
	c.kfake.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.kfake.KeepControl()
		req := kreq.(*kmsg.HeartbeatRequest)
		if req.Group != group || !heartbeat.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	c.kfake.ControlKey(int16(kmsg.JoinGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.kfake.KeepControl()
		req := kreq.(*kmsg.JoinGroupRequest)
		if req.Group != group || req.MemberID == "" || !join.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	join.Store(true)
	heartbeat.Store(true)

	const n = 3000
	produce(t, pcl, "j", 1000, n, 20*time.Millisecond) // ~1 s
	testkit.WaitFor(t, 30*time.Second, "the feed to start its partitions again as a new member", func() bool { return epochs() >= 2 })
	if join.Load() || heartbeat.Load() {
		t.Fatal("the group's answers were not made: the test did not test")
	}
	testkit.WaitForState(t, 30*time.Second, "every copy delivered", func() (bool, string) {
		m := r.missing("j", n)
		return len(m) == 0, fmt.Sprintf("%d missing", len(m))
	})
	time.Sleep(2 * time.Second) // the commits after the rejoin
	if back := watch.finish(); len(back) > 0 {
		t.Errorf("committed offsets moved backwards %d times: %v", len(back), back)
	}
	d, total := r.counts()
	t.Logf("%d copies, %d delivered, %d duplicates", d, total, total-d)
}

// TestOwnCommitsOnlyAsTheAssignedMember: a copy feed reading on its own
// commits what its ledger confirmed only as the group member whose
// assignment the ledger holds. While franz-go is joined as another member
// whose assignment the feed has not taken yet (what follows a pause past
// the session timeout), or as a member the coordinator refused, nothing is
// committed — the commit would carry the old assignment's offsets into the
// new generation — though copies flow; once an assignment is taken, commits
// resume, as that member.
func TestOwnCommitsOnlyAsTheAssignedMember(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	r := newReceiver(t)
	// A long session: the reader holds a poll once its membership is
	// unproven for a third of it, which the member switched below is.
	h := newHarness(t, c, func(cfg *Config) { cfg.SessionTimeout = 30 * time.Second; cfg.SoloReads = true })
	h.run(FeedSpec{Name: "s", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}})
	group := h.m.cfg.GroupPrefix + "s"
	var commits atomic.Int64
	var members sync.Map // member ids the commits carried
	c.kfake.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.kfake.KeepControl()
		if req := kreq.(*kmsg.OffsetCommitRequest); req.Group == group {
			commits.Add(1)
			members.Store(req.MemberID, true)
		}
		return nil, nil, false
	})
	pcl := producer(t, c)
	produce(t, pcl, "a", 0, 500, 0)
	testkit.WaitFor(t, 20*time.Second, "copies delivered and committed", func() bool {
		return len(r.missing("a", 500)) == 0 && commits.Load() > 0
	})
	f := h.m.feedSet()["s"]
	member := f.mship.member()
	f.mship.took("another-member")      // as if franz-go had joined again, its assignment not taken yet
	time.Sleep(1500 * time.Millisecond) // a commit in flight lands
	before := commits.Load()
	produce(t, pcl, "b", 0, 500, 0) // confirmed in the ledger, pending
	testkit.WaitFor(t, 20*time.Second, "copies delivered meanwhile", func() bool { return len(r.missing("b", 500)) == 0 })
	time.Sleep(2500 * time.Millisecond) // two commit intervals
	if n := commits.Load() - before; n != 0 {
		t.Fatalf("%d commits while the assignment held is another member's", n)
	}
	f.mship.took(member)
	testkit.WaitFor(t, 30*time.Second, "commits resumed", func() bool { return commits.Load() > before })
	// The same member id, refused by the coordinator since (librdkafka's
	// mock reuses member ids): nothing of it is committed either.
	f.mship.refused.Store(true)
	time.Sleep(1500 * time.Millisecond)
	before = commits.Load()
	produce(t, pcl, "c", 0, 500, 0)
	testkit.WaitFor(t, 20*time.Second, "copies delivered meanwhile", func() bool { return len(r.missing("c", 500)) == 0 })
	time.Sleep(2500 * time.Millisecond)
	if n := commits.Load() - before; n != 0 {
		t.Fatalf("%d commits as a member the coordinator refused", n)
	}
	f.mship.took(member)
	testkit.WaitFor(t, 30*time.Second, "commits resumed", func() bool { return commits.Load() > before })
	members.Range(func(k, _ any) bool {
		if k.(string) != member {
			t.Errorf("a commit carried member %q, want %q", k, member)
		}
		return true
	})
}
