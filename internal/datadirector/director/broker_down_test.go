package director

import (
	"fmt"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestBrokerDownMidStream: two nodes share a feed on a three-broker
// cluster; one broker goes down while copies stream in (kfake: for good, its
// partitions and groups move to the others; librdkafka's mock: for three
// seconds, its partitions unavailable meanwhile). Every copy is delivered,
// the feed's commits never move backwards, and what is delivered twice is
// at most what the consumer had past the commits when the partitions moved
// (the most it ever had: on the mock the group's coordinator is down with
// the broker, so nothing commits for those seconds and every member is
// dropped), plus an eighth of the copies for what was in flight between two
// looks at the commits.
func TestBrokerDownMidStream(t *testing.T) {
	onEachCluster(t, 3, func(t *testing.T, c *testCluster) {
		r := newReceiver(t)
		spec := FeedSpec{Name: "steady", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}}
		session := func(cfg *Config) { cfg.SessionTimeout = c.session }
		na, nb := newHarness(t, c, session), newHarness(t, c, session)
		na.apply(spec)
		nb.run(spec)
		waitTapsSplit(t, []*harness{na, nb}, 6)
		watch := watchDelivery(na.m, "signalbox-feed-steady", func() int { d, _ := r.counts(); return d })

		const n = 8000
		pcl := producer(t, c)
		produced := make(chan struct{})
		go func() { defer close(produced); produce(t, pcl, "b", 0, n, 25*time.Millisecond) }() // ~4 s
		testkit.WaitFor(t, 30*time.Second, "copies to flow", func() bool { d, _ := r.counts(); return d > 1000 })
		c.down(t, 1)
		if c.up != nil {
			time.Sleep(3 * time.Second)
			c.up(t, 1)
		}
		<-produced
		testkit.WaitForState(t, 60*time.Second, "every copy delivered", func() (bool, string) {
			m := r.missing("b", n)
			return len(m) == 0, fmt.Sprintf("%d missing", len(m))
		})
		time.Sleep(2 * commitInterval)
		if back := watch.finish(); len(back) > 0 {
			t.Errorf("committed offsets moved backwards %d times: %v", len(back), back)
		}
		d, total := r.counts()
		window := watch.maxWindow()
		t.Logf("%d copies, %d delivered, %d duplicates; at most %d delivered past the commits", d, total, total-d, window)
		if limit := window + n/8; total-d > limit {
			t.Errorf("%d duplicates of %d copies: more than %d, the most delivered past the commits and an eighth", total-d, n, limit)
		}
	})
}
