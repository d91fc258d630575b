//go:build !race

package director

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestNodesExactlyOnceKilled: an exactly-once kafka feed's node is killed
// (SIGKILL) mid-backlog and started again under its name; kcat reading the
// output with isolation.level=read_committed finds every copy once: what
// the killed node had produced in its open transaction is aborted (its
// restart fences it), and read again from the offsets its last committed
// transaction left.
//
// On kfake only. librdkafka's mock cluster takes transactions (markers,
// aborted ranges, the last stable offset) but its TxnOffsetCommit handler
// checks the request and stores nothing (rdkafka_mock_handlers.c,
// rd_kafka_mock_handle_TxnOffsetCommit): offsets committed in a transaction
// are lost, so on it a restarted node reads from the offsets it started
// with and produces everything again, in transactions that commit. Run
// there, this test finds 1,992 of 8,000 copies twice, kcat and franz-go
// alike: what the mock does, not what the feed does.
func TestNodesExactlyOnceKilled(t *testing.T) {
	nodeTest(t)
	kcat := testkit.Tool(t, "kcat")
	func(t *testing.T, c *testCluster) {
		nc := eosNode(t, c)
		// The copies are there before the node starts, so its polls are
		// full (MaxBatch) and a kill most likely lands in a transaction.
		const n = 20000
		produce(t, producer(t, c), "x", 0, n, 0)
		a := startNode(t, nc)
		out := newOutputReader(t, c, "probe.out")
		testkit.WaitForState(t, 20*time.Second, "copies out", func() (bool, string) {
			u, _ := out.counts("x-")
			return u >= 2000, fmt.Sprintf("%d unique", u)
		})
		a.signal(syscall.SIGKILL)
		_ = a.cmd.Wait()
		startNode(t, nc) // the same name: the same transactional id
		testkit.WaitForState(t, 90*time.Second, "every copy out once", func() (bool, string) {
			u, d := out.counts("x-")
			return u == n, fmt.Sprintf("%d unique, %d duplicates", u, d)
		})
		if u, d := out.counts("x-"); d != 0 {
			t.Errorf("read_committed: %d unique, %d duplicates", u, d)
		}
		// kcat (librdkafka) reads the same: each copy once.
		if u, d := kcatKeys(t, kcat, c, "probe.out"); u != n || d != 0 {
			t.Errorf("kcat read_committed: %d unique, %d duplicates; want %d once", u, d, n)
		}
		all := newOutputReaderIso(t, c, "probe.out", kgo.ReadUncommitted())
		time.Sleep(2 * time.Second)
		u, d := all.counts("x-")
		t.Logf("read_uncommitted shows %d unique and %d aborted duplicates", u, d)
	}(t, startCluster(t, kfakeCluster, 1))
}

// TestNodesExactlyOnceZombie: a node is paused (SIGSTOP) past its session
// timeout mid-transaction, another node takes its partitions and delivers;
// resumed, the paused node's transaction is fenced by the group generation
// (KIP-447) and aborted. On kfake only: librdkafka's mock, spoken to at
// Kafka 2.3's versions, has no TxnOffsetCommit v3 (generation and member),
// so a zombie there would be fenced by nothing but its transaction timeout.
func TestNodesExactlyOnceZombie(t *testing.T) {
	nodeTest(t)
	c := startCluster(t, kfakeCluster, 1)
	nc := eosNode(t, c)
	a := startNode(t, nc)
	out := newOutputReader(t, c, "probe.out")
	const n = 10000
	pcl := producer(t, c)
	produced := make(chan struct{})
	go func() { defer close(produced); produce(t, pcl, "z", 0, n, 25*time.Millisecond) }() // ~5 s
	testkit.WaitForState(t, 20*time.Second, "copies out", func() (bool, string) {
		u, _ := out.counts("z-")
		return u > 1000, fmt.Sprintf("%d unique", u)
	})
	a.signal(syscall.SIGSTOP)
	nc.Node = "b"
	startNode(t, nc)
	time.Sleep(3 * c.session) // a's session ends; b takes every partition
	a.signal(syscall.SIGCONT)
	<-produced
	testkit.WaitForState(t, 90*time.Second, "every copy out once", func() (bool, string) {
		u, d := out.counts("z-")
		return u == n, fmt.Sprintf("%d unique, %d duplicates", u, d)
	})
	time.Sleep(2 * time.Second) // what the zombie might still commit
	if u, d := out.counts("z-"); u != n || d != 0 {
		t.Errorf("read_committed: %d unique, %d duplicates; want %d once", u, d, n)
	}
	if !strings.Contains(a.output(), "transaction") {
		t.Logf("the resumed node logged no refused transaction:\n%s", a.output())
	}
}

// kcatKeys reads topic with kcat, isolation.level=read_committed, and
// counts the distinct keys and how many more times than once they came.
func kcatKeys(t *testing.T, kcat string, c *testCluster, topic string) (unique, dups int) {
	t.Helper()
	args := []string{"-C", "-b", strings.Join(c.brokers, ","), "-t", topic, "-X", "isolation.level=read_committed", "-e", "-o", "beginning", "-q", "-f", "%k\n"}
	raw, err := exec.Command(kcat, args...).Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	seen := map[string]int{}
	for _, k := range strings.Fields(string(raw)) {
		seen[k]++
	}
	for _, v := range seen {
		dups += v - 1
	}
	return len(seen), dups
}

// eosNode positions an exactly-once feed's group, as the API does, and
// returns the configuration of a node named "a" that runs it.
func eosNode(t *testing.T, c *testCluster) nodeConfig {
	t.Helper()
	spec := FeedSpec{Name: "eos", Type: TypeKafka, Sources: []string{"SCP", "NRF"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}, ExactlyOnce: true, Start: "earliest"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := newHarness(t, c).m.Prepare(ctx, &spec); err != nil {
		t.Fatal(err)
	}
	return nodeConfig{Kafka: c.ClientConfig(), Feeds: []FeedSpec{spec}, SessionTimeout: c.session, Node: "a"}
}

// TestNodesExactlyOnceBrokerDown: mid-stream, on kfake, one of three brokers
// goes away (its partitions' leadership, groups and transactions move to the
// others), or the coordinators move, or every partition elects a new leader
// (its epoch bumped, as after a broker restart): the transaction in flight
// fails or aborts, the poll is read again, and read_committed sees every
// copy once.
func TestNodesExactlyOnceBrokerDown(t *testing.T) {
	nodeTest(t)
	for _, fault := range []string{"broker-removed", "coordinators-moved", "leaders-elected"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, kfakeCluster, 3)
			nc := eosNode(t, c)
			const n = 20000
			produce(t, producer(t, c), "b", 0, n, 0)
			startNode(t, nc)
			out := newOutputReader(t, c, "probe.out")
			testkit.WaitForState(t, 20*time.Second, "copies out", func() (bool, string) {
				u, _ := out.counts("b-")
				return u >= 2000, fmt.Sprintf("%d unique", u)
			})
			switch fault {
			case "broker-removed":
				c.down(t, 0)
			case "coordinators-moved":
				c.kfake.RehashCoordinators()
			case "leaders-elected":
				c.kfake.ShufflePartitionLeaders()
			}
			testkit.WaitForState(t, 90*time.Second, "every copy out once", func() (bool, string) {
				u, d := out.counts("b-")
				return u == n, fmt.Sprintf("%d unique, %d duplicates", u, d)
			})
			time.Sleep(time.Second)
			if u, d := out.counts("b-"); u != n || d != 0 {
				t.Errorf("read_committed: %d unique, %d duplicates; want %d once", u, d, n)
			}
		})
	}
}
