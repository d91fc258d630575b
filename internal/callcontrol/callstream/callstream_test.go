package callstream

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

func rec(i int) *callrecord.Record {
	return &callrecord.Record{Time: time.Now(), Node: "sb1", Policy: "default", Calling: fmt.Sprintf("+1972555%04d", i%50),
		Called: "5000", Decision: "permit", Step: "default", Sent: "continue", LatencyMicros: 50, Client: "10.0.0.5:5000"}
}

// Records reach the topic, one JSON call record each, keyed by the
// calling number.
func TestRecordsReachTheTopic(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Addr: "127.0.0.1:0", Topics: []broker.TopicSpec{{Name: "CALLS", Partitions: 3}}})
	s, err := New(Config{Client: b.ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, 5*time.Second) }()
	const n = 5000
	for i := range n {
		s.Record(rec(i))
	}
	cancel()
	<-done // Run flushes what is queued before it returns
	if got := testutil.ToFloat64(s.produced); got != n {
		t.Fatalf("produced %v, want %d (dropped %v, failed %v)", got, n, testutil.ToFloat64(s.dropped), testutil.ToFloat64(s.failed))
	}
	recs := kafkatest.NewReader(t, b.ClientConfig(), []string{"CALLS"}).Read(n, 10*time.Second)
	if len(recs) != n {
		t.Fatalf("consumed %d, want %d", len(recs), n)
	}
	for i, r := range recs {
		var c callrecord.Record
		if err := callrecord.Decode(r.Value, &c); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, r.Value)
		}
		if string(r.Key) != c.Calling {
			t.Errorf("key %q, calling %q", r.Key, c.Calling)
		}
	}
}

// A broker that does not answer costs records, counted, never a wait.
func TestUnreachableBrokerDropsWithoutWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	s, err := New(Config{Client: broker.ClientConfig{Brokers: []string{addr}}, Queue: 100, DeliveryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx, 100*time.Millisecond)
	start := time.Now()
	for i := range 1000 {
		s.Record(rec(i))
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("1,000 Record calls took %s", d)
	}
	testkit.WaitFor(t, 10*time.Second, "every record dropped or failed", func() bool {
		return testutil.ToFloat64(s.dropped)+testutil.ToFloat64(s.failed) == 1000
	})
	if n, why := s.Lost(); n != 1000 || why == "" {
		t.Errorf("Lost() = %d, %q; want 1000 and a reason", n, why)
	}
	if testutil.ToFloat64(s.produced) != 0 {
		t.Error("produced to nowhere")
	}
}

func BenchmarkRecord(b *testing.B) {
	bk := kafkatest.StartBroker(b, broker.Config{Addr: "127.0.0.1:0", Topics: []broker.TopicSpec{{Name: "CALLS", Partitions: 6}}})
	s, err := New(Config{Client: bk.ClientConfig()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, 10*time.Second) }()
	r := rec(1)
	b.ReportAllocs()
	cpu := testkit.CPUTime()
	for b.Loop() {
		s.Record(r)
	}
	cancel()
	<-done
	testkit.ReportCPU(b, cpu)
	b.ReportMetric(testutil.ToFloat64(s.dropped), "dropped")
}
