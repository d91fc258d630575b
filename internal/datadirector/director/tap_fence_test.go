package director

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestTapUnprovenPollsReadAgain: while the tap's group refuses its fencing
// commits (its coordinator down or the group rebalancing) for longer than a
// third of a session timeout, the tap cannot prove it still holds its
// partitions and hands out nothing it polls. When the membership survives
// (no callback tells the tap to reposition), those polls must be fetched
// again once the commits pass, not skipped: every copy reaches the feed.
// (librdkafka's mock showed it: a broker holding the tap group's
// coordinator down for 3 s, and 2,642 copies of 8,000 never delivered.)
func TestTapUnprovenPollsReadAgain(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	r := newReceiver(t)
	h := newHarness(t, c, func(cfg *Config) { cfg.SessionTimeout = c.session })
	h.run(FeedSpec{Name: "f", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}})
	tapGroup := h.m.cfg.GroupPrefix + "tap.NRF+SCP"

	var refuse atomic.Bool
	var refused atomic.Int64
	refuseCommits(c, tapGroup, &refuse, &refused)

	pcl := producer(t, c)
	produce(t, pcl, "u", 0, 500, 0)
	testkit.WaitFor(t, 20*time.Second, "the first copies delivered", func() bool { return len(r.missing("u", 500)) == 0 })

	const n = 4000
	refuse.Store(true)
	produce(t, pcl, "u", 500, n, 40*time.Millisecond) // ~3 s, past session/3 = 2 s
	time.Sleep(c.session / 2)
	refuse.Store(false)
	if refused.Load() == 0 {
		t.Fatal("no fencing commit was refused: the test did not test")
	}
	testkit.WaitForState(t, 30*time.Second, "every copy delivered", func() (bool, string) {
		m := r.missing("u", n)
		return len(m) == 0, fmt.Sprintf("%d missing", len(m))
	})
	if got := testutil.ToFloat64(h.m.m.fencedCommits.WithLabelValues("NRF,SCP")); got == 0 {
		t.Error("signalbox_feed_tap_fenced_commits_total did not count the refused commits")
	}
	if got := testutil.ToFloat64(h.m.m.tapRewinds.WithLabelValues("NRF,SCP")); got == 0 {
		t.Error("no poll was read again (signalbox_feed_tap_rewinds_total 0): the test did not test")
	}
}

// TestTapDetachedMemberWaitsForProof: a feed the tap detached reads the
// tap's partitions on its own, outside any group. After a pause (here: the
// tap's fencing commits refused past a third of the session timeout), what
// it polls may belong to another node by then; it delivers nothing until
// the tap proves its membership, then everything.
func TestTapDetachedMemberWaitsForProof(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	h := newHarness(t, c, func(cfg *Config) {
		cfg.SessionTimeout = c.session
		cfg.TapStall, cfg.RejoinAfter = 300*time.Millisecond, time.Hour // detached for the whole test
	})
	fast, slow := newReceiver(t), newReceiver(t)
	h.apply(
		FeedSpec{Name: "fast", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: fast.addr}},
		FeedSpec{Name: "slow", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: slow.addr}},
	)
	tapGroup := h.m.cfg.GroupPrefix + "tap.NRF+SCP"
	var refuse atomic.Bool
	var refused atomic.Int64
	refuseCommits(c, tapGroup, &refuse, &refused)
	pcl := producer(t, c)
	slow.stop()
	produce(t, pcl, "c", 0, 1000, 10*time.Millisecond)
	testkit.WaitFor(t, 30*time.Second, "the slow feed detached", func() bool { return h.status("slow").Reader == ReaderOwn })
	slow.restart()
	testkit.WaitFor(t, 30*time.Second, "the slow feed caught up on its own", func() bool { return len(slow.missing("c", 1000)) == 0 })

	refuse.Store(true)
	time.Sleep(c.session/3 + 1500*time.Millisecond) // the tap's last proof is older than a third of the session
	produce(t, pcl, "x", 0, 500, 0)
	time.Sleep(2 * time.Second)
	if got := 500 - len(slow.missing("x", 500)); got != 0 {
		t.Fatalf("the detached feed delivered %d copies while the tap's membership was unproven", got)
	}
	if refused.Load() == 0 {
		t.Fatal("no fencing commit was refused: the test did not test")
	}
	refuse.Store(false)
	testkit.WaitFor(t, 30*time.Second, "every copy delivered once the tap is proven", func() bool {
		return len(slow.missing("x", 500)) == 0 && len(fast.missing("x", 500)) == 0
	})
	if st := h.status("slow"); st.Reader != ReaderOwn {
		t.Errorf("slow reader %q: the test meant it detached throughout", st.Reader)
	}
}

// refuseCommits has kfake answer group's offset commits REBALANCE_IN_PROGRESS
// while refuse is set (a coordinator that cannot confirm the membership),
// counting them in refused.
func refuseCommits(c *testCluster, group string, refuse *atomic.Bool, refused *atomic.Int64) {
	c.kfake.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.kfake.KeepControl()
		req := kreq.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() || req.Group != group {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RebalanceInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}
