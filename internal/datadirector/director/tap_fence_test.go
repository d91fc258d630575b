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
	h.run(FeedSpec{Name: "f", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, Endpoint: r.addr})
	tapGroup := h.m.cfg.GroupPrefix + "tap.NRF+SCP"

	var refuse atomic.Bool
	var refused atomic.Int64
	c.kfake.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.kfake.KeepControl()
		req := kreq.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() || req.Group != tapGroup {
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
