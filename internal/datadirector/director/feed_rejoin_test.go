package director

import (
	"fmt"
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
	h.run(FeedSpec{Name: "s", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, Endpoint: r.addr})
	group := h.m.cfg.GroupPrefix + "s"

	pcl := producer(t, c)
	produce(t, pcl, "j", 0, 1000, 0)
	testkit.WaitFor(t, 20*time.Second, "the first copies delivered", func() bool { return len(r.missing("j", 1000)) == 0 })
	epochs := func() (lo uint64) {
		h.m.lmu.Lock()
		led := h.m.ledgers["s"]
		h.m.lmu.Unlock()
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
