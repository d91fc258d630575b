package director

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
	"github.com/signalbox/signalbox/internal/testkit"
)

// Four copy feeds of the same sources read through one tap: each gets every
// copy exactly once, its own filter applies, and each feed's own group holds
// its offsets.
func TestTapFeedsShareOneReader(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	pcl := producer(t, b)
	var rcvs []*receiver
	var specs []FeedSpec
	for i := range 3 {
		r := newReceiver(t)
		rcvs = append(rcvs, r)
		sources := []string{"SCP", "NRF"}
		if i == 1 {
			sources = []string{"NRF", "SCP"} // the same set
		}
		specs = append(specs, FeedSpec{Name: fmt.Sprintf("probe-%d", i), Type: TypeSynthetic, Sources: sources, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}})
	}
	// Only responses: the copies below are all requests.
	none := newReceiver(t)
	specs = append(specs, FeedSpec{Name: "responses", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"},
		SyntheticSpec: SyntheticSpec{Endpoint: none.addr}, Directions: []string{"RESPONSE_EGRESS"}})
	h.apply(specs...)
	const n = 3000
	produce(t, pcl, "c", 0, n, 0)
	for i, r := range rcvs {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("receiver %d to get every copy", i), func() bool { return len(r.missing("c", n)) == 0 })
	}
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	for i, r := range rcvs {
		if d, tot := r.counts(); d != n || tot != n {
			t.Errorf("receiver %d: %d distinct, %d total; want exactly %d", i, d, tot, n)
		}
	}
	if d, _ := none.counts(); d != 0 {
		t.Errorf("the responses-only feed delivered %d request copies", d)
	}
	h.m.rmu.Lock()
	taps := len(h.m.taps)
	h.m.rmu.Unlock()
	if taps != 1 {
		t.Errorf("%d taps for four feeds of one source set, want 1", taps)
	}
	for _, s := range specs {
		testkit.WaitFor(t, 30*time.Second, s.Name+"'s group to commit everything (lag 0)", func() bool { return h.status(s.Name).Lag == 0 })
		st := h.status(s.Name)
		if st.Reader != ReaderShared {
			t.Errorf("%s reader = %q, want %q", s.Name, st.Reader, ReaderShared)
		}
		if st.Redelivered != 0 || st.Failed != 0 {
			t.Errorf("%s: %+v", s.Name, st)
		}
	}
	if st := h.status("responses"); st.Delivered != 0 {
		t.Errorf("responses feed: delivered %d request copies", st.Delivered)
	}
	// The feeds' groups hold the offsets; the tap's own group, whose
	// commits fence the feeds', holds at most the lowest of theirs.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testkit.WaitFor(t, 30*time.Second, "every feed's group to commit every copy", func() bool {
		total := int64(0)
		for _, s := range specs {
			offs, err := h.m.adm.FetchOffsets(ctx, h.m.cfg.GroupPrefix+s.Name)
			if err != nil {
				return false
			}
			offs.Each(func(o kadm.OffsetResponse) { total += max(o.At, 0) })
		}
		return total == int64(len(specs))*n
	})
	tapOffs, err := h.m.adm.FetchOffsets(ctx, h.m.cfg.GroupPrefix+"tap.NRF+SCP")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		offs, err := h.m.adm.FetchOffsets(ctx, h.m.cfg.GroupPrefix+s.Name)
		if err != nil {
			t.Fatal(err)
		}
		tapOffs.Each(func(o kadm.OffsetResponse) {
			if fo, ok := offs.Lookup(o.Topic, o.Partition); o.At >= 0 && (!ok || fo.At < o.At) {
				t.Errorf("tap group committed %s/%d at %d, past feed %s's %d", o.Topic, o.Partition, o.At, s.Name, fo.At)
			}
		})
	}
}

// A feed whose consumer is down is dropped from the tap within TapStall:
// the others keep their pace. It catches up on its own, losing nothing, and
// rejoins the tap.
func TestTapDropsStalledFeedAndRejoins(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b, func(c *Config) {
		c.TapStall, c.RejoinAfter, c.RejoinLag = 300*time.Millisecond, time.Second, 100
	})
	pcl := producer(t, b)
	fast, slow := newReceiver(t), newReceiver(t)
	h.apply(
		FeedSpec{Name: "fast", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: fast.addr}},
		FeedSpec{Name: "slow", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: slow.addr}},
	)
	slow.stop()
	const n = 2000
	start := time.Now()
	produce(t, pcl, "c", 0, n, 20*time.Millisecond) // 40 batches over ~1 s: many polls
	testkit.WaitFor(t, 30*time.Second, "the fast feed to get every copy while the slow one is down", func() bool { return len(fast.missing("c", n)) == 0 })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the fast feed took %v: held back by the slow one", d)
	}
	testkit.WaitFor(t, 30*time.Second, "the slow feed to be dropped", func() bool { return h.status("slow").Reader == ReaderOwn })
	if got := testutil.ToFloat64(h.m.m.tapDrops.WithLabelValues("slow")); got != 1 {
		t.Errorf("signalbox_feed_shared_reader_drops_total{feed=slow} = %g, want 1", got)
	}
	if st := h.status("fast"); st.Reader != ReaderShared {
		t.Errorf("fast reader = %q", st.Reader)
	}
	slow.restart()
	testkit.WaitFor(t, 30*time.Second, "the slow feed to catch up", func() bool { return len(slow.missing("c", n)) == 0 })
	testkit.WaitFor(t, 15*time.Second, "the slow feed back on the tap", func() bool { return h.status("slow").Reader == ReaderShared })
	produce(t, pcl, "d", 0, n, 0)
	testkit.WaitFor(t, 30*time.Second, "both feeds to get the copies after the rejoin", func() bool {
		return len(fast.missing("d", n)) == 0 && len(slow.missing("d", n)) == 0
	})
	time.Sleep(300 * time.Millisecond)
	if _, tot := fast.counts(); tot != 2*n {
		t.Errorf("fast feed: %d copies, want exactly %d", tot, 2*n)
	}
	d, tot := slow.counts()
	if d != 2*n {
		t.Errorf("slow feed: %d distinct copies, want %d", d, 2*n)
	}
	t.Logf("slow feed: %d distinct, %d total (%d duplicates from the outage)", d, tot, tot-d)
	// At-least-once resends what was unconfirmed when the consumer went
	// away, a few batches; never a tenth of what the feed carried.
	if tot-d > 2*n/10 {
		t.Errorf("slow feed: %d duplicates of %d copies after one outage", tot-d, 2*n)
	}
}

// Two nodes run the same two feeds: their taps share one consumer group, so
// each node reads part of the partitions, and each feed still gets every
// copy.
func TestTapSpreadsPartitionsAcrossNodes(t *testing.T) {
	b := startBroker(t, broker.Config{})
	pcl := producer(t, b)
	ra, rb := newReceiver(t), newReceiver(t)
	specs := []FeedSpec{
		{Name: "a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: ra.addr}},
		{Name: "b", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rb.addr}},
	}
	n1 := newHarness(t, b)
	n1.apply(specs...)
	n2 := newHarness(t, b)
	n2.run(specs...)
	waitTapsSplit(t, []*harness{n1, n2}, 6) // SCP's 4 partitions and NRF's 2
	const n = 3000
	produce(t, pcl, "c", 0, n, 0)
	for _, r := range []*receiver{ra, rb} {
		testkit.WaitFor(t, 30*time.Second, "every copy on both feeds", func() bool { return len(r.missing("c", n)) == 0 })
	}
	for _, name := range []string{"a", "b"} {
		// Each copy is read by the one node holding its partition: both
		// deliver, and together exactly the copies produced. A feed
		// counts a copy delivered when its sink confirms it, a moment
		// after the receiver has it.
		var d1, d2 uint64
		testkit.WaitForState(t, 30*time.Second, "feed "+name+"'s delivered counts", func() (bool, string) {
			d1, d2 = n1.status(name).Delivered, n2.status(name).Delivered
			return d1+d2 >= n, fmt.Sprintf("node 1 %d, node 2 %d", d1, d2)
		})
		if d1 == 0 || d2 == 0 || d1+d2 != n {
			t.Errorf("feed %s: node 1 delivered %d, node 2 %d; want both to share the %d copies", name, d1, d2, n)
		}
	}
	for i, r := range []*receiver{ra, rb} {
		d, tot := r.counts()
		t.Logf("feed %d: %d distinct, %d total", i, d, tot)
	}
}

// Two nodes run one feed, each node's copy of it to its own consumer. When
// node 1's consumer is down, its tap detaches the feed there, and node 1
// reads on its own only the partitions its tap holds: node 2 keeps
// delivering and committing its own partitions, and no copy reaches both
// consumers (a feed reading with its own consumer group there would have
// taken every partition, as that group's only member).
func TestTapDetachedFeedKeepsToItsNode(t *testing.T) {
	b := startBroker(t, broker.Config{})
	pcl := producer(t, b)
	r1, r2 := newReceiver(t), newReceiver(t)
	cfg := func(c *Config) { c.TapStall, c.RejoinAfter = 300*time.Millisecond, time.Hour }
	n1 := newHarness(t, b, cfg)
	n1.apply(FeedSpec{Name: "a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r1.addr}})
	n2 := newHarness(t, b, cfg)
	n2.run(FeedSpec{Name: "a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r2.addr}})
	waitTapsSplit(t, []*harness{n1, n2}, 6)
	produce(t, pcl, "w", 0, 300, 0)
	testkit.WaitFor(t, 20*time.Second, "both nodes to deliver", func() bool {
		return n1.status("a").Delivered > 0 && n2.status("a").Delivered > 0 && len(missingFromBoth(r1, r2, "w", 300)) == 0
	})

	r1.stop()
	const n = 3000
	produce(t, pcl, "c", 0, n, 10*time.Millisecond)
	testkit.WaitFor(t, 30*time.Second, "node 1's feed detached", func() bool { return n1.status("a").Reader == ReaderOwn })
	if st := n2.status("a"); st.Reader != ReaderShared {
		t.Errorf("node 2's feed reader = %q", st.Reader)
	}
	r1.restart()
	testkit.WaitFor(t, 30*time.Second, "every copy at one of the consumers", func() bool { return len(missingFromBoth(r1, r2, "c", n)) == 0 })
	time.Sleep(500 * time.Millisecond)
	r1.mu.Lock()
	r2.mu.Lock()
	both := 0
	for id := range r1.seen {
		if strings.HasPrefix(id, "c-") && r2.seen[id] > 0 {
			both++
		}
	}
	r2.mu.Unlock()
	r1.mu.Unlock()
	if both > 0 {
		t.Errorf("%d copies reached both nodes' consumers: node 1 read node 2's partitions", both)
	}
	if st := n2.status("a"); strings.Contains(st.LastError, "commit") {
		t.Errorf("node 2's commits failed: %s", st.LastError)
	}
	if got := n1.status("a").Reader; got != ReaderOwn {
		t.Errorf("node 1's feed reader = %q, want own until RejoinAfter", got)
	}
	testkit.WaitFor(t, 15*time.Second, "the feed's lag to reach 0 (both nodes' commits land)", func() bool {
		return n1.status("a").Lag == 0 && n2.status("a").Lag == 0
	})
}

// A detached feed follows its node's partitions as they move: when a third
// node joins, node 1's catch-up reader gives up the partitions its tap lost,
// so copies produced after the move reach exactly one node's consumer, and
// none is lost across the move.
func TestTapDetachedFeedFollowsItsPartitions(t *testing.T) {
	b := startBroker(t, broker.Config{})
	pcl := producer(t, b)
	rs := []*receiver{newReceiver(t), newReceiver(t), newReceiver(t)}
	cfg := func(c *Config) { c.TapStall, c.RejoinAfter = 300*time.Millisecond, time.Hour }
	spec := func(r *receiver) FeedSpec {
		return FeedSpec{Name: "a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}}
	}
	nodes := []*harness{newHarness(t, b, cfg), newHarness(t, b, cfg)}
	nodes[0].apply(spec(rs[0]))
	nodes[1].run(spec(rs[1]))
	waitTapsSplit(t, nodes, 6)

	rs[0].stop()
	const n = 2000
	produce(t, pcl, "c", 0, n, 10*time.Millisecond)
	testkit.WaitFor(t, 30*time.Second, "node 1's feed detached", func() bool { return nodes[0].status("a").Reader == ReaderOwn })

	nodes = append(nodes, newHarness(t, b, cfg))
	nodes[2].run(spec(rs[2]))
	waitTapsSplit(t, nodes, 6)
	produce(t, pcl, "d", 0, n, 0)
	rs[0].restart()
	for _, prefix := range []string{"c", "d"} {
		testkit.WaitFor(t, 30*time.Second, "every "+prefix+" copy at one of the consumers", func() bool {
			for i := range n {
				id := prefix + "-" + strconv.Itoa(i)
				got := false
				for _, r := range rs {
					r.mu.Lock()
					got = got || r.seen[id] > 0
					r.mu.Unlock()
				}
				if !got {
					return false
				}
			}
			return true
		})
	}
	time.Sleep(500 * time.Millisecond)
	twice := 0
	for i := range n {
		id := "d-" + strconv.Itoa(i)
		at := 0
		for _, r := range rs {
			r.mu.Lock()
			if r.seen[id] > 0 {
				at++
			}
			r.mu.Unlock()
		}
		if at > 1 {
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("%d copies produced after the partitions moved reached two nodes' consumers", twice)
	}
	if got := nodes[0].status("a").Reader; got != ReaderOwn {
		t.Errorf("node 1's feed reader = %q, want own until RejoinAfter", got)
	}
}

func missingFromBoth(r1, r2 *receiver, prefix string, n int) []string {
	m2 := map[string]bool{}
	for _, id := range r2.missing(prefix, n) {
		m2[id] = true
	}
	var out []string
	for _, id := range r1.missing(prefix, n) {
		if m2[id] {
			out = append(out, id)
		}
	}
	return out
}

// Partitions lost (the group gave them away while this node was cut off)
// are forgotten without a commit: a commit from here would move the new
// owner's position back. The other partitions' confirmations stay pending.
func TestTapLostPartitionsNotCommitted(t *testing.T) {
	m := offlineManager(t)
	f := m.newFeed(runPlan{FeedSpec: FeedSpec{Name: "x", Type: TypeSynthetic}})
	tp0 := m.newTap("SCP", []string{"SCP"})
	t.Cleanup(func() { close(tp0.quit) })
	mem := &tapMember{t: tp0, f: f}
	tp0.do(func(s *tapState) {
		s.assigned("m1", map[string][]int32{"SCP": {0, 1}})
		s.members = []*tapMember{mem}
	})
	e0, e1 := f.led.assign(tp{"SCP", 0}, 0), f.led.assign(tp{"SCP", 1}, 0)
	f.led.confirm(tp{"SCP", 0}, e0, 9, 0)
	f.led.confirm(tp{"SCP", 1}, e1, 4, 0)
	// The broker at 127.0.0.1:1 is not there: a commit would fail and mark
	// the feed in error.
	tp0.partitionsLost(context.Background(), nil, map[string][]int32{"SCP": {1}})
	if got, want := f.led.pending(), map[tp]pendingCommit{{"SCP", 0}: {10, e0}}; !maps.Equal(got, want) {
		t.Fatalf("after losing SCP/1: to commit %v, want %v still pending", got, want)
	}
	if st := f.status(); st.LastError != "" {
		t.Fatalf("a commit was tried: %s", st.LastError)
	}
	if parts, _ := tp0.assignment(); parts[tp{"SCP", 1}] || !parts[tp{"SCP", 0}] {
		t.Errorf("tap partitions after the loss: %v", parts)
	}
}

// rawReceiver keeps every byte a consumer is sent, on one connection.
type rawReceiver struct {
	addr  string
	mu    sync.Mutex
	buf   []byte
	conns int
}

func newRawReceiver(t *testing.T) *rawReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &rawReceiver{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
			go func() {
				defer c.Close()
				_, _ = io.Copy(r, c)
			}()
		}
	}()
	return r
}

// Write keeps p (the connection's reader copies into it).
func (r *rawReceiver) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	return len(p), nil
}

func (r *rawReceiver) bytes() ([]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.buf), r.conns
}

// Synthetic feeds on one tap with the same address mappings share each
// copy's connection-independent encoding; each stream is byte for byte what
// a synthetic encoder of its own makes of the partition's copies, in order,
// and a feed with other mappings gets its own encoding.
func TestTapSyntheticFeedsShareEncoding(t *testing.T) {
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 1}, {Name: "NRF", Partitions: 1},
		{Name: broker.DLQTopic, Partitions: 1}, {Name: "probe.out", Partitions: 1}}
	b := startBroker(t, broker.Config{Topics: topics})
	h := newHarness(t, b, func(c *Config) { c.NewSink = nil; c.Topics = topics[:3] }) // the real synthetic sink
	pcl := producer(t, b)
	mapped := []AddrMapping{{NFFQDN: "scp1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: "10.7.7.7:8443"}}
	var rcvs []*rawReceiver
	var specs []FeedSpec
	for i := range 4 {
		r := newRawReceiver(t)
		rcvs = append(rcvs, r)
		s := FeedSpec{Name: fmt.Sprintf("probe-%d", i), Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}}
		if i == 3 {
			s.Mappings = mapped
		}
		specs = append(specs, s)
	}
	h.apply(specs...)
	testkit.WaitFor(t, 30*time.Second, "the feeds to run on the tap", func() bool {
		for _, s := range specs {
			if h.status(s.Name).Reader != ReaderShared {
				return false
			}
		}
		return true
	})
	const n, scp = 600, 400
	produce(t, pcl, "s", 0, n, 0) // two copies in three are SCP's
	for _, s := range specs {
		testkit.WaitFor(t, 30*time.Second, s.Name+" to deliver every SCP copy", func() bool { return h.status(s.Name).Delivered >= scp })
	}

	// What an encoder of its own makes of the partition, in order.
	cl, err := b.ClientConfig().NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"SCP": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var copies []*nfcopy.Copy
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(copies) < scp && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var c nfcopy.Copy
			if err := nfcopy.Decode(r.Value, &c); err != nil {
				t.Fatal(err)
			}
			copies = append(copies, c.Clone())
		})
	}
	encode := func(maps []synthetic.Mapping) []byte {
		e := synthetic.NewEncoder(synthetic.EncoderOptions{Mappings: maps})
		out := e.AppendHeader(nil)
		for _, c := range copies {
			out = e.AppendCopy(out, c)
		}
		return out
	}
	want := encode(nil)
	wantMapped := encode([]synthetic.Mapping{{NFFQDN: "scp1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: netip.MustParseAddrPort("10.7.7.7:8443")}})
	if bytes.Equal(want, wantMapped) {
		t.Fatal("the mapping changes nothing: the test cannot tell the keys apart")
	}
	for i, r := range rcvs {
		w := want
		if i == 3 {
			w = wantMapped
		}
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("receiver %d to read %d bytes", i, len(w)), func() bool {
			got, _ := r.bytes()
			return len(got) >= len(w)
		})
		got, conns := r.bytes()
		if conns != 1 {
			t.Fatalf("receiver %d: %d connections; the test needs one", i, conns)
		}
		if !bytes.Equal(got, w) {
			t.Errorf("receiver %d: %d bytes differ from its own encoder's %d", i, len(got), len(w))
		}
	}
	h.m.rmu.Lock()
	var shared int64
	for _, tp := range h.m.taps {
		shared += tp.sharedEncodings.Load()
	}
	h.m.rmu.Unlock()
	if shared < scp {
		t.Errorf("%d copies encoded once for several sinks, want at least %d", shared, scp)
	}
}

// Every attached member is handed each poll once, and they take turns at
// being first, so that no feed's copies always wait for the others' writes.
func TestTapMembersTakeTurns(t *testing.T) {
	mems := make([]*tapMember, 4)
	for i := range mems {
		mems[i] = &tapMember{}
	}
	orig := slices.Clone(mems)
	firsts := map[*tapMember]int{}
	for turn := range uint(8) {
		got := inTurn(mems, turn)
		if len(got) != len(mems) {
			t.Fatalf("turn %d: %d members handed, want %d", turn, len(got), len(mems))
		}
		for i, mem := range got {
			if want := mems[(int(turn)+i)%len(mems)]; mem != want {
				t.Fatalf("turn %d: position %d is member %d, want %d", turn, i, slices.Index(mems, mem), slices.Index(mems, want))
			}
		}
		firsts[got[0]]++
	}
	for i, mem := range mems {
		if firsts[mem] != 2 {
			t.Errorf("member %d was first %d times in 8 polls, want 2", i, firsts[mem])
		}
	}
	if got := inTurn(mems[:1], 5); len(got) != 1 || got[0] != mems[0] {
		t.Errorf("one member: %v", got)
	}
	if got := inTurn(nil, 3); len(got) != 0 {
		t.Errorf("no member: %v", got)
	}
	if !slices.Equal(mems, orig) {
		t.Fatal("inTurn reordered its argument")
	}
}

// waitTapsSplit waits until the nodes' taps hold the sources' parts
// partitions between them, each partition on exactly one node and every
// tap with some.
func waitTapsSplit(t *testing.T, nodes []*harness, parts int) {
	t.Helper()
	// librdkafka's mock waits its session timeout less a second per
	// rebalance round, and can leave partitions a cooperative round
	// revoked unassigned for tens of seconds (see zombieCommitsNothing):
	// the split took 22 s beside other packages' tests under the race
	// detector, and over 60 s once in make test.
	timeout := 60 * time.Second
	if c, ok := nodes[0].b.(*testCluster); ok && c.kind == librdkafkaCluster {
		timeout = 150 * time.Second
	}
	began := time.Now()
	defer func() {
		t.Logf("the taps split the %d partitions in %v", parts, time.Since(began).Round(100*time.Millisecond))
	}()
	testkit.WaitFor(t, timeout, fmt.Sprintf("the taps to split the %d partitions", parts), func() bool {
		seen := map[tp]int{}
		for _, h := range nodes {
			h.m.rmu.Lock()
			if len(h.m.taps) == 0 {
				// A node's tap is made once its feed reads: until then
				// the others' split is the old one.
				h.m.rmu.Unlock()
				return false
			}
			for _, tap := range h.m.taps {
				held, _ := tap.assignment()
				if len(held) == 0 {
					h.m.rmu.Unlock()
					return false
				}
				for k := range held {
					seen[k]++
				}
			}
			h.m.rmu.Unlock()
		}
		for _, c := range seen {
			if c != 1 {
				return false
			}
		}
		return len(seen) == parts
	})
}

// A feed whose consumer group the broker does not know (never positioned,
// or forgotten by the embedded broker) starts as its spec says, and the
// other feeds of its tap go on: kfake answers such an offset fetch with
// GROUP_ID_NOT_FOUND, which failed the whole tap's fetch for every feed.
func TestTapFeedWithoutGroup(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	pcl := producer(t, b)
	known, unknown := newReceiver(t), newReceiver(t)
	h.apply(FeedSpec{Name: "known", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: known.addr}})
	const n = 500
	produce(t, pcl, "c", 0, n, 0)
	testkit.WaitFor(t, 20*time.Second, "the known feed's copies", func() bool { return len(known.missing("c", n)) == 0 })
	// Applied without Prepare: no group exists for it.
	h.run(FeedSpec{Name: "known", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: known.addr}},
		FeedSpec{Name: "ungrouped", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: unknown.addr}})
	// Rounds of copies until the new member, started at the end of the
	// log whenever the tap took it in, has a whole round; the known feed
	// gets every round.
	round := 0
	testkit.WaitForState(t, 30*time.Second, "a whole round on the ungrouped feed (start: latest)", func() (bool, string) {
		round++
		prefix := fmt.Sprintf("r%d-", round)
		produce(t, pcl, prefix, 0, 100, 0)
		time.Sleep(300 * time.Millisecond)
		return len(unknown.missing(prefix, 100)) == 0, fmt.Sprintf("round %d", round)
	})
	for r := 1; r <= round; r++ {
		prefix := fmt.Sprintf("r%d-", r)
		testkit.WaitFor(t, 20*time.Second, "the known feed's round "+prefix, func() bool { return len(known.missing(prefix, 100)) == 0 })
	}
	if _, tot := unknown.counts(); tot > round*100 {
		t.Errorf("the ungrouped feed got %d copies; it started at the end, not at the log start", tot)
	}
}
