//go:build !race

package director

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// An exactly-once xdr feed's transactions span polls and partitions: each
// transaction's response is copied 40 transactions after its request, and
// every 25th is never answered (a response timeout, 2 s later), so the
// correlator always holds open transactions whose copies are above the
// committed offsets. Killed (SIGKILL), paused past its session while
// another node takes over, or with a broker gone mid-transaction, the feed
// is taken up from its checkpoints, and
// read_committed finds one record per transaction, each with the result
// its copies make: complete, or response_timeout for the unanswered.
func TestNodesExactlyOnceXDR(t *testing.T) {
	nodeTest(t)
	kcat := testkit.Tool(t, "kcat")
	for _, fault := range []string{"killed", "zombie", "broker-removed"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			brokers := 1
			if fault == "broker-removed" {
				brokers = 3
			}
			c := startCluster(t, kfakeCluster, brokers)
			// A 2 s transaction timeout keeps the test short; a broker's
			// removal moves the NRF partitions' leaders, and on a loaded
			// machine a partition may stall past 2 s while the other goes
			// on, timing out requests whose responses wait behind it (seen
			// under make test: 690 transactions split into a timeout and
			// an orphan response; the correlator's clock does not yet hold
			// for a stalled source partition). That case runs with the
			// product's default timeout, 5 s.
			timeout := "2s"
			if fault == "broker-removed" {
				timeout = ""
			}
			spec := FeedSpec{Name: "eosx", Type: TypeXDR, Sources: []string{"NRF"}, KafkaSpec: KafkaSpec{Topic: "xdr.out"}, ExactlyOnce: true,
				Start: "earliest", XDR: &XDRSpec{Timeout: timeout}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := newHarness(t, c).m.Prepare(ctx, &spec); err != nil {
				t.Fatal(err)
			}
			nc := nodeConfig{Kafka: c.ClientConfig(), Feeds: []FeedSpec{spec}, SessionTimeout: c.session, Node: "a"}
			const n = 6000
			// Keyed by correlation id for the zombie, whose partitions
			// end up split between two nodes: a transaction's copies must
			// then share a partition. The killed node reads alone, and
			// its transactions span both partitions.
			keyed := fault == "zombie"
			produced := make(chan struct{})
			go func() { defer close(produced); produceTransactions(t, producer(t, c), n, keyed) }()
			a := startNode(t, nc)
			out := newOutputReader(t, c, "xdr.out")
			testkit.WaitForState(t, 30*time.Second, "records out", func() (bool, string) {
				u, _ := out.counts("t-")
				return u >= 1000, fmt.Sprintf("%d unique", u)
			})
			switch fault {
			case "killed":
				a.signal(syscall.SIGKILL)
				_ = a.cmd.Wait()
				startNode(t, nc) // the same name: the same transactional id
			case "zombie":
				a.signal(syscall.SIGSTOP)
				nc.Node = "b"
				startNode(t, nc)
				time.Sleep(3 * c.session) // a's session ends; b takes every partition
				a.signal(syscall.SIGCONT)
			case "broker-removed":
				c.down(t, 0) // its leaderships, groups and transactions move
			}
			<-produced
			testkit.WaitForState(t, 90*time.Second, "one record per transaction", func() (bool, string) {
				u, d := out.counts("t-")
				return u == n, fmt.Sprintf("%d unique, %d duplicates", u, d)
			})
			time.Sleep(3 * time.Second) // what a zombie might still commit, and late timeouts
			if u, d := out.counts("t-"); u != n || d != 0 {
				t.Errorf("read_committed: %d unique records, %d duplicates; want %d once", u, d, n)
				src := newOutputReaderBy(t, c, "NRF", kgo.ReadCommitted(), func(r *kgo.Record) string { return string(r.Value) })
				testkit.WaitFor(t, 30*time.Second, "the source read", func() bool { u, _ := src.counts(""); return u >= 2*n-n/25 })
				u, d := src.counts("")
				t.Logf("the source NRF: %d distinct copies, %d duplicates", u, d)
			}
			checkResults(t, c, n)
			if u, d := kcatKeys(t, kcat, c, "xdr.out"); u != n || d != 0 {
				t.Errorf("kcat read_committed: %d unique records, %d duplicates; want %d once", u, d, n)
			}
		})
	}
}

// produceTransactions copies n NRF transactions t-0 ... into NRF: the
// request of i, then the response of i-40; every 25th is not answered.
func produceTransactions(t *testing.T, cl *kgo.Client, n int, keyed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := func(i int, dir nfcopy.Direction) *kgo.Record {
		id := "t-" + strconv.Itoa(i)
		r := &kgo.Record{Topic: "NRF", Value: fixture.Record(id, "NRF", dir)}
		if keyed {
			r.Key = []byte(id)
		}
		return r
	}
	const lag = 40
	var recs []*kgo.Record
	for i := 0; i < n+lag; i++ {
		if i < n {
			recs = append(recs, rec(i, nfcopy.RequestIngress))
		}
		if j := i - lag; j >= 0 && j%25 != 0 {
			recs = append(recs, rec(j, nfcopy.ResponseEgress))
		}
		if len(recs) >= 100 || i == n+lag-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			recs = recs[:0]
			time.Sleep(20 * time.Millisecond) // ~4,000 transactions/s
		}
	}
}

// checkResults reads the records read_committed and checks each one's
// result.
func checkResults(t *testing.T, c *testCluster, n int) {
	t.Helper()
	cl, err := c.ClientConfig().NewClient(kgo.ConsumeTopics("xdr.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen, wrong := 0, 0
	results := map[string]map[string]bool{} // by correlation id: the results its records carry
	for seen < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen++
			var rec xdr.Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("record %s: %v", r.Key, err)
			}
			if results[rec.CorrelationID] == nil {
				results[rec.CorrelationID] = map[string]bool{}
			}
			results[rec.CorrelationID][rec.Result] = true
			i, _ := strconv.Atoi(rec.CorrelationID[len("t-"):])
			want := xdr.ResultComplete
			if i%25 == 0 {
				want = xdr.ResultResponseTimeout
			}
			if rec.Result != want {
				if wrong++; wrong <= 5 {
					t.Errorf("%s: result %s, want %s", rec.CorrelationID, rec.Result, want)
				}
			}
		})
	}
	if seen != n || wrong > 0 {
		t.Errorf("%d records read, %d with the wrong result", seen, wrong)
		// A transaction split in two — its request timed out, then its
		// response came as an orphan — is no copy read twice: the
		// correlator's clock ran on while the other half was not read yet
		// (a partition whose leader moved, a transaction coordinator
		// moving).
		split := 0
		for _, rs := range results {
			if rs[xdr.ResultResponseTimeout] && rs[xdr.ResultOrphanResponse] {
				split++
			}
		}
		t.Logf("transactions split into a response timeout and an orphan response: %d", split)
	}
}
