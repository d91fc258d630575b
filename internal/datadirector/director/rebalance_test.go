package director

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestFeedChangesLeaveOtherNodesCalm: two nodes share a steady feed. On
// node B, other feeds of the same sources (they join the same tap) and of
// other sources (a tap of their own) are created and deleted again and
// again while copies flow. Node A's tap goes through no rebalance and the
// steady feed delivers every copy exactly once.
func TestFeedChangesLeaveOtherNodesCalm(t *testing.T) {
	onEachCluster(t, 1, feedChangesLeaveOtherNodesCalm)
}

func feedChangesLeaveOtherNodesCalm(t *testing.T, b *testCluster) {
	pcl := producer(t, b)
	r := newReceiver(t)
	steady := FeedSpec{Name: "steady", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}}
	session := func(cfg *Config) { cfg.SessionTimeout = b.session }
	na, nb := newHarness(t, b, session), newHarness(t, b, session)
	na.apply(steady)
	nb.run(steady)
	waitTapsSplit(t, []*harness{na, nb}, 6)
	rebalancesA := func() float64 { return testutil.ToFloat64(na.m.m.tapRebalances.WithLabelValues("NRF,SCP")) }
	before := rebalancesA()

	const n = 8000
	produced := make(chan struct{})
	go func() { defer close(produced); produce(t, pcl, "s", 0, n, 25*time.Millisecond) }() // ~4 s
	other := newReceiver(t)
	changes := 0
	for i := 0; ; i++ {
		select {
		case <-produced:
		default:
			extra := []FeedSpec{
				{Name: fmt.Sprintf("same-%d", i), Type: TypeSynthetic, Sources: []string{"NRF", "SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: other.addr}},
				{Name: fmt.Sprintf("nrf-%d", i), Type: TypeSynthetic, Sources: []string{"NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: other.addr}},
			}
			nb.apply(append([]FeedSpec{steady}, extra...)...)
			time.Sleep(300 * time.Millisecond)
			nb.run(steady)
			changes += 2
			time.Sleep(200 * time.Millisecond)
			continue
		}
		break
	}
	testkit.WaitForState(t, 30*time.Second, "every copy on the steady feed", func() (bool, string) {
		m := r.missing("s", n)
		return len(m) == 0, fmt.Sprintf("%d missing", len(m))
	})
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	d, total := r.counts()
	rebalances := rebalancesA() - before
	t.Logf("%d feeds created and deleted on node B: node A's tap rebalanced %v times; steady feed: %d copies, %d delivered, %d duplicates",
		changes, rebalances, d, total, total-d)
	if rebalances != 0 {
		t.Errorf("node A's tap rebalanced %v times", rebalances)
	}
	if total != n {
		t.Errorf("steady feed: %d delivered for %d copies", total, n)
	}
}
