package director

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("DIRECTOR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return testkit.FailureLogger(t)
}

// kafkaCluster is what the tests reach Kafka through: the embedded broker,
// or a testCluster.
type kafkaCluster interface {
	ClientConfig() broker.ClientConfig
}

type harness struct {
	t    *testing.T
	b    kafkaCluster
	m    *Manager
	reg  *prometheus.Registry
	stop func()
}

// newHarness builds a Manager whose synthetic feeds use the acknowledged
// TCP test sink (the endpoint is the receiver) and other feeds the real sinks.
func newHarness(t *testing.T, b kafkaCluster, opts ...func(*Config)) *harness {
	h := &harness{t: t, b: b, reg: prometheus.NewRegistry()}
	var m *Manager
	cfg := Config{
		// probe.out is an output, not a source.
		Client: b.ClientConfig(), Topics: testTopics[:3], Registerer: h.reg, Logger: testLogger(t),
		LagInterval: 200 * time.Millisecond, BackoffMin: 50 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		NewSink: func(spec *FeedSpec) (Sink, error) {
			if spec.Type == TypeSynthetic {
				return &tcpSink{addr: spec.Endpoint}, nil
			}
			return m.defaultSink(spec)
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	h.stop = func() { cancel(); <-done }
	t.Cleanup(h.stop)
	return h
}

func (h *harness) apply(specs ...FeedSpec) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range specs {
		if err := h.m.Prepare(ctx, &specs[i]); err != nil {
			h.t.Fatalf("prepare %s: %v", specs[i].Name, err)
		}
	}
	if err := h.m.Apply(ctx, specs); err != nil {
		h.t.Fatalf("apply: %v", err)
	}
}

// run applies specs of feeds that already exist in the cluster, as another
// node does from the store: without Prepare, which positions a new feed's
// group at the end of its sources and would skip what is still undelivered.
func (h *harness) run(specs ...FeedSpec) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Apply(ctx, specs); err != nil {
		h.t.Fatalf("apply: %v", err)
	}
}

func (h *harness) status(name string) FeedStatus {
	st, ok := h.m.Status(name)
	if !ok {
		h.t.Fatalf("no status for feed %s", name)
	}
	return st
}

// waitDelivered waits until feed name has delivered more than n copies,
// failing with the feed's state, counts and last error.
func (h *harness) waitDelivered(name string, n uint64, timeout time.Duration) {
	h.t.Helper()
	testkit.WaitForState(h.t, timeout, fmt.Sprintf("%s to deliver more than %d", name, n), func() (bool, string) {
		st := h.status(name)
		return st.Delivered > n, fmt.Sprintf("state %s, reader %q, delivered %d, failed %d, retries %d, lag %d, last error %q",
			st.State, st.Reader, st.Delivered, st.Failed, st.Retries, st.Lag, st.LastError)
	})
}

func producer(t *testing.T, b kafkaCluster) *kgo.Client {
	cl, err := b.ClientConfig().NewClient(kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestFeedsDeliverExactlyN(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	// Copies from before the feeds exist are not delivered (start latest).
	produce(t, pcl, "old", 0, 30, 0)
	h.apply(
		FeedSpec{Name: "probe-a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}},
		FeedSpec{Name: "to-kafka", Type: TypeKafka, Sources: []string{"SCP", "NRF"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}},
	)
	const n = 3000
	produce(t, pcl, "c", 0, n, 0)
	testkit.WaitFor(t, 30*time.Second, "both feeds to deliver everything", func() bool {
		return h.status("probe-a").Delivered >= n && h.status("to-kafka").Delivered >= n
	})
	if miss := rcv.missing("c", n); len(miss) > 0 {
		t.Fatalf("%d copies missing at the receiver, e.g. %v", len(miss), miss[:min(5, len(miss))])
	}
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	if d, tot := rcv.counts(); d != n || tot != n {
		t.Errorf("receiver: %d distinct, %d total; want exactly %d", d, tot, n)
	}
	keys, total := countTopic(t, b.ClientConfig(), "probe.out", n)
	if len(keys) != n || total != n {
		t.Errorf("probe.out: %d distinct keys, %d records; want exactly %d", len(keys), total, n)
	}
	for k := range keys {
		if strings.HasPrefix(k, "old-") {
			t.Fatalf("copy %s produced before the feed was created was delivered", k)
		}
	}
	for _, name := range []string{"probe-a", "to-kafka"} {
		st := h.status(name)
		if st.Delivered != n || st.Failed != 0 || st.State != StateConnected || st.DeliveredBytes == 0 {
			t.Errorf("%s status: %+v", name, st)
		}
		if st.LatencyP50 <= 0 || st.LatencyMax < st.LatencyP99 || st.LatencyMax > 30 {
			t.Errorf("%s latency p50=%g p99=%g max=%g", name, st.LatencyP50, st.LatencyP99, st.LatencyMax)
		}
		if got := testutil.ToFloat64(h.m.m.delivered.WithLabelValues(name)); got != n {
			t.Errorf("%s signalbox_feed_delivered_total = %g", name, got)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "lag to reach 0", func() bool { return h.status("probe-a").Lag == 0 })
	if c, err := testutil.GatherAndCount(h.reg, "signalbox_feed_e2e_latency_seconds"); err != nil || c != 2 {
		t.Errorf("latency histograms: %d series, want 2 (%v)", c, err)
	}
}

func TestReceiverOutageLosesNothing(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	h.apply(FeedSpec{Name: "probe-a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}})
	const n = 3000
	done := make(chan struct{})
	go func() { defer close(done); produce(t, pcl, "c", 0, n, 20*time.Millisecond) }() // ~1.2 s
	time.Sleep(400 * time.Millisecond)
	rcv.stop()
	testkit.WaitFor(t, 30*time.Second, "the feed to notice the outage", func() bool { return h.status("probe-a").Failed > 0 })
	if st := h.status("probe-a").State; st != StateDisconnected {
		t.Errorf("state during outage = %s", st)
	}
	time.Sleep(2 * time.Second)
	rcv.restart()
	<-done
	testkit.WaitFor(t, 30*time.Second, "every copy after the outage", func() bool { return len(rcv.missing("c", n)) == 0 })
	st := h.status("probe-a")
	if st.Retries == 0 || st.LastError == "" {
		t.Errorf("status after outage: %+v", st)
	}
	testkit.WaitFor(t, 30*time.Second, "state connected", func() bool { return h.status("probe-a").State == StateConnected })
	d, tot := rcv.counts()
	t.Logf("outage: %d distinct, %d total (%d duplicates), %d failed sends", d, tot, tot-d, st.Failed)
}

func TestManagerRestartLosesNothing(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	spec := FeedSpec{Name: "probe-a", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}}
	h1 := newHarness(t, b)
	pcl := producer(t, b)
	h1.apply(spec)
	const n = 3000
	done := make(chan struct{})
	go func() { defer close(done); produce(t, pcl, "c", 0, n, 20*time.Millisecond) }()
	h1.waitDelivered("probe-a", 300, 10*time.Second)
	h1.stop()
	time.Sleep(500 * time.Millisecond)
	h2 := newHarness(t, b)
	// Apply without Prepare, as at process start: the group's commits rule.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h2.m.Apply(ctx, []FeedSpec{spec}); err != nil {
		t.Fatal(err)
	}
	<-done
	testkit.WaitFor(t, 30*time.Second, "every copy after the restart", func() bool { return len(rcv.missing("c", n)) == 0 })
	d, tot := rcv.counts()
	t.Logf("restart: %d distinct, %d total (%d duplicates; redelivered counted in-process: %d)", d, tot, tot-d, h2.status("probe-a").Redelivered)
}

// TestBadRecordGoesToDLQ: an undecodable record is skipped, counted and
// dead-lettered once, whatever number of feeds read its topic: three here,
// two on one shared reader and one on another (other sources).
func TestBadRecordGoesToDLQ(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv, rcvB, rcvC := newReceiver(t), newReceiver(t), newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	h.apply(FeedSpec{Name: "probe-a", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}},
		FeedSpec{Name: "probe-b", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: rcvB.addr}},
		FeedSpec{Name: "probe-c", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcvC.addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs := []*kgo.Record{
		{Topic: "SCP", Key: []byte("bad"), Value: fixture.Record("good-0", "SCP", nfcopy.RequestIngress)},
		{Topic: "SCP", Key: []byte("bad"), Value: []byte(`{"version":"1.0.0","metadata-list":{`)},
		{Topic: "SCP", Key: []byte("bad"), Value: fixture.Record("good-1", "SCP", nfcopy.ResponseEgress)},
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(t, pcl, "more", 0, 100, 0) // the feed keeps going
	testkit.WaitFor(t, 20*time.Second, "good copies around the bad one", func() bool {
		return len(rcv.missing("good", 2)) == 0 && h.status("probe-a").Delivered >= 2+66
	})
	testkit.WaitFor(t, 20*time.Second, "the other feeds past the bad copy", func() bool {
		return h.status("probe-b").Delivered >= 2+66 && h.status("probe-c").Delivered >= 2+66
	})
	for _, name := range []string{"probe-a", "probe-b", "probe-c"} {
		if st := h.status(name); st.Invalid != 1 {
			t.Errorf("%s: invalid = %d, want 1", name, st.Invalid)
		}
	}
	if got := testutil.ToFloat64(h.m.m.invalid.WithLabelValues("SCP", "syntax")); got != 1 {
		t.Errorf("signalbox_copy_invalid_total{topic=SCP,reason=syntax} = %g", got)
	}
	cl, err := b.ClientConfig().NewClient(kgo.ConsumeTopics(broker.DLQTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	rs := fs.Records()
	if len(rs) != 1 {
		t.Fatalf("DLQ holds %d records, want 1 (fetch errors: %v)", len(rs), fs.Errors())
	}
	hdr := map[string]string{}
	for _, x := range rs[0].Headers {
		hdr[x.Key] = string(x.Value)
	}
	if !strings.Contains(hdr["signalbox-error"], "syntax") || hdr["signalbox-source-topic"] != "SCP" ||
		hdr["signalbox-source-partition"] != strconv.Itoa(int(recs[1].Partition)) || hdr["signalbox-source-offset"] != "1" || string(rs[0].Key) != "bad" {
		t.Errorf("DLQ record headers %v key %q", hdr, rs[0].Key)
	}
}

func TestDirectionFilter(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	h.apply(FeedSpec{Name: "resp", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr},
		Directions: []string{"RESPONSE_EGRESS"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i, d := range []nfcopy.Direction{nfcopy.RequestIngress, nfcopy.RequestEgress, nfcopy.ResponseIngress, nfcopy.ResponseEgress} {
		recs = append(recs, &kgo.Record{Topic: "SCP", Value: fixture.Record("d-"+d.String()+"-"+string(rune('0'+i)), "SCP", d)})
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the response copy", func() bool { d, _ := rcv.counts(); return d >= 1 })
	testkit.WaitFor(t, 30*time.Second, "lag 0", func() bool { return h.status("resp").Lag == 0 })
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.seen) != 1 || rcv.seen["d-RESPONSE_EGRESS-3"] != 1 {
		t.Errorf("received %v, want only the RESPONSE_EGRESS copy", rcv.seen)
	}
}

func TestPrepareThenProduce(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	produce(t, pcl, "before", 0, 50, 0)
	spec := FeedSpec{Name: "late", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Prepare(ctx, &spec); err != nil {
		t.Fatal(err)
	}
	// Produced after Prepare returned but before the feed runs.
	produce(t, pcl, "after", 0, 200, 0)
	if err := h.m.Apply(ctx, []FeedSpec{spec}); err != nil {
		t.Fatal(err)
	}
	produce(t, pcl, "after", 200, 400, 0)
	testkit.WaitFor(t, 20*time.Second, "all copies produced after Prepare", func() bool { return len(rcv.missing("after", 400)) == 0 })
	if miss := rcv.missing("before", 50); len(miss) != 50 {
		t.Errorf("%d copies from before Prepare delivered", 50-len(miss))
	}
	// earliest: everything retained.
	rcv2 := newReceiver(t)
	spec2 := FeedSpec{Name: "all", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv2.addr}, Start: "earliest"}
	if err := h.m.Prepare(ctx, &spec2); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Apply(ctx, []FeedSpec{spec, spec2}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "earliest feed to get everything", func() bool {
		return len(rcv2.missing("before", 50)) == 0 && len(rcv2.missing("after", 400)) == 0
	})
}

// TestTakenOverFeedStartsFromCreation: a feed run for another site (a
// takeover) starts a partition it has no position on at the first copy
// since the feed's creation, not at the end (which would skip what came
// since), and not at the start (which would deliver what came before).
func TestTakenOverFeedStartsFromCreation(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	produce(t, pcl, "before", 0, 60, 0)
	time.Sleep(20 * time.Millisecond)
	created := time.Now()
	time.Sleep(20 * time.Millisecond)
	produce(t, pcl, "after", 0, 120, 0)
	spec := FeedSpec{Name: "peers", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}, Created: &created}
	if err := h.m.ApplyPlans(context.Background(), []Plan{{Spec: spec, FromCreation: true}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "every copy since the feed's creation", func() bool { return len(rcv.missing("after", 120)) == 0 })
	if miss := rcv.missing("before", 60); len(miss) != 60 {
		t.Errorf("%d copies from before the feed's creation delivered", 60-len(miss))
	}
}

func TestLostToRetentionCounted(t *testing.T) {
	b := startBroker(t, broker.Config{Retention: time.Second})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	spec := FeedSpec{Name: "slow", Type: TypeSynthetic, Sources: []string{"NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}, Start: "earliest"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Prepare(ctx, &spec); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "NRF", Value: fixture.Record("x-"+string(rune('a'+i)), "NRF", nfcopy.RequestIngress)})
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	b.ApplyRetention()
	if err := h.m.Apply(ctx, []FeedSpec{spec}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "lost copies counted", func() bool { return h.status("slow").LostToRetention == 20 })
	if got := testutil.ToFloat64(h.m.m.lost.WithLabelValues("slow")); got != 20 {
		t.Errorf("signalbox_feed_lost_total = %g", got)
	}
}

func TestApplyReconciles(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	a := FeedSpec{Name: "a", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}}
	c := FeedSpec{Name: "c", Type: TypeKafka, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}}
	h.apply(a, c)
	off := false
	a2 := a
	a2.Sources = []string{"SCP", "NRF"}
	c.Enabled = &off
	bad := FeedSpec{Name: "BAD NAME", Type: TypeKafka}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.m.Apply(ctx, []FeedSpec{a2, c, bad})
	if err == nil || !strings.Contains(err.Error(), "name") {
		t.Fatalf("apply with an invalid feed: err = %v", err)
	}
	if st := h.status("c").State; st != StateStopped {
		t.Errorf("disabled feed state %s", st)
	}
	if st := h.status("BAD NAME").State; st != StateError {
		t.Errorf("invalid feed state %s", st)
	}
	pcl := producer(t, b)
	produce(t, pcl, "n", 0, 30, 0) // a third go to NRF, which only the changed feed reads
	testkit.WaitFor(t, 30*time.Second, "changed feed to read NRF too", func() bool { return len(rcv.missing("n", 30)) == 0 })
	if err := h.m.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(h.m.Statuses()) != 0 {
		t.Errorf("feeds left after removing all: %v", h.m.Statuses())
	}
}

// TestApplyDuringDelivery changes a feed while it is busy: Apply must
// restart it mid-stream, and the restarted feed loses nothing.
func TestApplyDuringDelivery(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b)
	pcl := producer(t, b)
	spec := FeedSpec{Name: "busy", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}}
	h.apply(spec)
	const n = 2000
	done := make(chan struct{})
	go func() { defer close(done); produce(t, pcl, "c", 0, n, 10*time.Millisecond) }()
	for i := range 3 {
		h.waitDelivered("busy", 100, 20*time.Second)
		spec.Directions = []string{"REQUEST_INGRESS", "RESPONSE_EGRESS"}[:1+i%2] // a change restarts the feed
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		if err := h.m.Apply(ctx, []FeedSpec{spec}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("Apply took %s", d)
		}
	}
	<-done
	testkit.WaitFor(t, 30*time.Second, "every copy across restarts", func() bool { return len(rcv.missing("c", n)) == 0 })
}

// TestStandbyThenDisabled: a feed that stands by for the other site, then is
// disabled here, shows "stopped", not "standby" (its spec's JSON is the same
// both times).
func TestStandbyThenDisabled(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	off := false
	spec := FeedSpec{Name: "lake", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "127.0.0.1:9"}, Enabled: &off}
	if err := h.m.ApplyPlans(context.Background(), []Plan{{Spec: spec, Standby: true}}); err != nil {
		t.Fatal(err)
	}
	if st := h.status("lake").State; st != StateStandby {
		t.Fatalf("standing by: state %q", st)
	}
	h.apply(spec)
	if st := h.status("lake").State; st != StateStopped {
		t.Errorf("disabled after standing by: state %q, want %q", st, StateStopped)
	}
}
