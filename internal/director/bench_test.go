package director

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// countSink confirms every batch at once: the benchmark measures the feed
// runtime (fetch, decode, filter, commit), not a consumer.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Send(_ context.Context, b []*nfcopy.Copy) error {
	s.n.Add(int64(len(b)))
	return nil
}
func (s *countSink) Close() error { return nil }

// BenchmarkFeed: b.N 3 KB copies already in SCP, one feed from earliest.
func BenchmarkFeed(b *testing.B) {
	ctx := context.Background()
	br, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", Topics: testTopics[:3]}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	pcl, err := br.ClientConfig().NewClient(kgo.ProducerLinger(5 * time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer pcl.Close()
	tmpl := string(fixture.Record("x", "SCP", nfcopy.RequestIngress))
	pad := make([]byte, 3000-len(tmpl))
	for i := range pad {
		pad[i] = 'a' + byte(i%26)
	}
	val := []byte(tmpl[:len(tmpl)-1] + `,"pad":"` + string(pad[:len(pad)-9]) + `"}`)
	for i := 0; i < b.N; i++ {
		pcl.Produce(ctx, &kgo.Record{Topic: "SCP", Key: []byte(strconv.Itoa(i)), Value: val}, nil)
	}
	if err := pcl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	sink := &countSink{}
	m, err := NewManager(Config{Client: br.ClientConfig(), Topics: testTopics[:3],
		NewSink: func(*FeedSpec) (Sink, error) { return sink, nil }})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	spec := FeedSpec{Name: "bench", Type: TypeSynthetic, Sources: []string{"SCP"}, Endpoint: "127.0.0.1:9", Start: "earliest"}
	if err := m.Prepare(ctx, &spec); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(val)))
	b.ResetTimer()
	start := time.Now()
	if err := m.Apply(ctx, []FeedSpec{spec}); err != nil {
		b.Fatal(err)
	}
	for sink.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "copies/s")
}

// BenchmarkFeedLatency paces 3 KB copies at 30,000/s through a running feed
// and reports the feed's end-to-end latency quantiles (run with
// -benchtime=60000x for two seconds of load).
func BenchmarkFeedLatency(b *testing.B) {
	ctx := context.Background()
	br, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", Topics: testTopics[:3]}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	pcl, err := br.ClientConfig().NewClient(kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer pcl.Close()
	sink := &countSink{}
	m, err := NewManager(Config{Client: br.ClientConfig(), Topics: testTopics[:3],
		NewSink: func(*FeedSpec) (Sink, error) { return sink, nil }})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	spec := FeedSpec{Name: "lat", Type: TypeSynthetic, Sources: []string{"SCP"}, Endpoint: "127.0.0.1:9"}
	if err := m.Prepare(ctx, &spec); err != nil {
		b.Fatal(err)
	}
	if err := m.Apply(ctx, []FeedSpec{spec}); err != nil {
		b.Fatal(err)
	}
	// Warm up until the group has joined and delivers.
	for sink.n.Load() == 0 {
		pcl.ProduceSync(ctx, &kgo.Record{Topic: "SCP", Value: fixture.Record("warm", "SCP", nfcopy.RequestIngress)})
		time.Sleep(20 * time.Millisecond)
	}
	m.mu.Lock()
	f := m.feeds["lat"]
	m.mu.Unlock()
	f.mu.Lock()
	f.hist.Rotate()
	for range 6 {
		f.hist.Rotate() // forget the warm-up
	}
	f.mu.Unlock()
	base := sink.n.Load()
	const rate, tick = 30000, 10 * time.Millisecond
	per := rate * int(tick) / int(time.Second)
	b.SetBytes(3000)
	b.ResetTimer()
	t := time.NewTicker(tick)
	defer t.Stop()
	for sent := 0; sent < b.N; {
		<-t.C
		for i := 0; i < per && sent < b.N; i, sent = i+1, sent+1 {
			c := &nfcopy.Copy{Version: "1.0.0", CorrelationID: strconv.Itoa(sent), Timestamp: time.Now().UnixNano(),
				Direction: nfcopy.RequestIngress, NFType: "SCP",
				Headers: []nfcopy.Header{{Name: ":method", Values: []string{"POST"}}, {Name: ":path", Values: []string{"/x"}}},
				Body:    make([]byte, 2700)}
			for j := range c.Body {
				c.Body[j] = 'a' + byte(j%26)
			}
			pcl.Produce(ctx, &kgo.Record{Topic: "SCP", Value: nfcopy.AppendJSON(nil, c)}, nil)
		}
	}
	for sink.n.Load()-base < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	st, _ := m.Status("lat")
	b.ReportMetric(st.LatencyP50*1e3, "p50-ms")
	b.ReportMetric(st.LatencyP99*1e3, "p99-ms")
	b.ReportMetric(st.LatencyMax*1e3, "max-ms")
}
