//go:build !race

package director

// The tests that run signalbox nodes as processes of their own (node_test.go)
// and pause, kill or add them: about timing across processes, which the
// race detector slows five- to tenfold in every node at once. make test
// runs them in its pass without the race detector (-run 'Alloc|^TestNodes'); the
// same code runs under the race detector in the in-process tests.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestNodesZombieCommitsNothing: two nodes share a feed; one is paused
// (SIGSTOP) past its session timeout while traffic flows, so the group
// gives its partitions to the other, which delivers and commits past
// where the paused node was. Resumed, the paused node still holds copies it
// confirmed before the pause and would commit them: the fence (the tap's
// own group refuses a member of a generation that is gone) stops it. The
// feed's committed offsets never move backwards, and nothing is lost.
//
// Feeds that read on their own (xdr feeds, call records, -feed-solo-reads)
// commit franz-go's marks through their group member, which carries the
// generation; the "solo" run holds them to the same.
func TestNodesZombieCommitsNothing(t *testing.T) {
	nodeTest(t)
	for _, solo := range []bool{false, true} {
		t.Run(map[bool]string{false: "tap", true: "solo"}[solo], func(t *testing.T) { t.Parallel(); zombieCommitsNothing(t, solo) })
	}
}

func zombieCommitsNothing(t *testing.T, solo bool) {
	onEachCluster(t, 1, func(t *testing.T, c *testCluster) {
		r := newReceiver(t)
		spec := FeedSpec{Name: "steady", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}}
		h := newHarness(t, c) // positions the feed's group, as the API does
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.m.Prepare(ctx, &spec); err != nil {
			t.Fatal(err)
		}
		session := c.session
		nc := nodeConfig{Kafka: c.ClientConfig(), Feeds: []FeedSpec{spec}, SessionTimeout: session, Solo: solo}
		a, bn := startNode(t, nc), startNode(t, nc)
		waitHeld(t, []*nodeProc{a, bn}, "steady", 6, 60*time.Second)

		const n = 12000
		pcl := producer(t, c)
		produced := make(chan struct{})
		go func() { defer close(produced); produce(t, pcl, "z", 0, n, 25*time.Millisecond) }() // ~6 s
		watch := watchCommits(h.m, "signalbox-feed-steady")
		testkit.WaitFor(t, 30*time.Second, "copies to flow", func() bool { d, _ := r.counts(); return d > 1000 })

		a.signal(syscall.SIGSTOP)
		paused := time.Now()
		waitHeld(t, []*nodeProc{bn}, "steady", 6, 3*session)
		time.Sleep(2 * commitInterval) // the new owner commits past where the paused node was
		t.Logf("paused %v; resuming", time.Since(paused).Round(100*time.Millisecond))
		a.signal(syscall.SIGCONT)

		<-produced
		testkit.WaitForState(t, 60*time.Second, "every copy delivered", func() (bool, string) {
			m := r.missing("z", n)
			return len(m) == 0, fmt.Sprintf("%d missing", len(m))
		})
		// librdkafka's mock cluster can take tens of seconds to assign
		// the partitions a cooperative rebalance revoked: 21 to 51 s for
		// this test alone, over 60 s beside other packages' tests in make
		// test's second pass (the rebalance test's comment has more).
		settle := 60 * time.Second
		if c.kind == librdkafkaCluster {
			settle = 150 * time.Second
		}
		resumed := time.Now()
		waitHeld(t, []*nodeProc{a, bn}, "steady", 6, settle)
		t.Logf("the group settled %v after the resumed node's copies were delivered", time.Since(resumed).Round(100*time.Millisecond))
		time.Sleep(2 * commitInterval)
		if back := watch.finish(); len(back) > 0 {
			t.Errorf("committed offsets moved backwards %d times: %v", len(back), back)
		}
		d, total := r.counts()
		t.Logf("%d copies, %d delivered, %d duplicates; the resumed node's commits or proofs refused: %d; polls read again for want of a proof: %d; it rejoined as a new member keeping partitions: %d",
			d, total, total-d, strings.Count(a.output(), errNotMember.Error()), strings.Count(a.output(), "membership not proven after a pause"),
			strings.Count(a.output(), "rejoined as a new group member"))
		// What is delivered twice is what the paused node had delivered
		// past its last commit, which the other node delivers again: at
		// most a commit interval (1 s) of its half of the 2,000 copies/s,
		// about 1,000, and the batches in flight in its pipeline, up to
		// about as many again; n/6 is 2,000. Measured 0-1,107 in 28 runs
		// beside two busy loops.
		//
		// More would mean the resumed node delivered what the group gave
		// away while it was paused: a poll fetched before the pause,
		// delivered before the node proved its membership (membership,
		// tap.prove: 4,894 once, solo on kfake), or a partition given
		// back and read on from franz-go's cursor instead of its commit
		// (tap.addParts, feed.assigned: 6,092 once on the mock).
		if total-d > n/6 {
			t.Errorf("%d duplicates of %d copies", total-d, n)
			r.mu.Lock()
			times := map[int]int{}
			first, last := n, 0
			for id, c := range r.seen {
				times[c]++
				if c > 1 {
					var i int
					fmt.Sscanf(id, "z-%d", &i)
					first, last = min(first, i), max(last, i)
				}
			}
			r.mu.Unlock()
			t.Logf("copies by times delivered: %v; duplicated ids from z-%d to z-%d", times, first, last)
		}
	})
}

// A node is killed (SIGKILL) in the middle of the stream: its share of
// both stages is read by the other only after the session timeout, and
// meanwhile the survivor's correlator waits for the copies stuck there
// instead of timing their transactions out.
func TestNodesXDRKilledMidStream(t *testing.T) {
	nodeTest(t)
	onEachCluster(t, 1, func(t *testing.T, c *testCluster) {
		dups, _ := xdrHandover(t, c, func(t *testing.T, nodes []*nodeProc, _ nodeConfig) {
			nodes[0].signal(syscall.SIGKILL)
		})
		// What the killed node emitted since its last commit (a second).
		if dups > 3000/10 {
			t.Errorf("%d duplicate records of 3000 transactions", dups)
		}
	})
}

// A third node joins in the middle of the stream and leaves again
// (SIGTERM): both groups rebalance twice, and the nodes that give up
// partitions hand their pending transactions over without records.
func TestNodesXDRRebalanceMidStream(t *testing.T) {
	nodeTest(t)
	// kfake only. On librdkafka's mock a rebalance round waits session
	// timeout - 1 s for members that are already in (rdkafka_mock_cgrp.c),
	// and partitions a cooperative round revoked stay unassigned for up to
	// tens of seconds: the same run took 26 to 195 s and split 0 to 1,801
	// transactions there, which says more about the mock than about a
	// rebalance. The mock still runs the kill, zombie, calm and broker-down
	// tests.
	c := startCluster(t, kfakeCluster, 1)
	dups, short := xdrHandover(t, c, func(t *testing.T, nodes []*nodeProc, nc nodeConfig) {
		third := startNode(t, nc)
		go func() {
			time.Sleep(4 * time.Second)
			third.signal(syscall.SIGTERM)
		}()
	})
	// Orderly hand-overs commit first and emit nothing twice but copies
	// the re-key stage produced twice; the correlators' clocks follow the
	// re-key stage's watermarks.
	if dups > 3000/100 {
		t.Errorf("%d duplicate records of 3000 transactions", dups)
	}
	if short > 3000/100 {
		t.Errorf("%d records of one NF's copies only", short)
	}
}
