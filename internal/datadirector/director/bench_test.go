package director

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/datadirector/xdrstore"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// runManager starts a manager of cfg, and returns it and what stops it
// (also when the test or benchmark ends).
func runManager(b testing.TB, cfg Config) (*Manager, func()) {
	m, err := NewManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	b.Cleanup(stop)
	return m, stop
}

// countSink confirms every batch at once: the benchmark measures the feed
// runtime (fetch, decode, filter, commit), not a consumer.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Send(_ context.Context, b []*nfcopy.Copy) error {
	s.n.Add(int64(len(b)))
	return nil
}
func (s *countSink) Close() error { return nil }

// BenchmarkFeed: b.N 3 KB copies already in SCP, one feed from earliest,
// read through its sources' tap.
func BenchmarkFeed(b *testing.B) { benchFeed(b, false) }

// BenchmarkFeedSolo is BenchmarkFeed with the feed reading on its own
// consumer group (sharing off, as xdr and call-record feeds always read).
func BenchmarkFeedSolo(b *testing.B) { benchFeed(b, true) }

func benchFeed(b *testing.B, solo bool) {
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
	m, _ := runManager(b, Config{Client: br.ClientConfig(), Topics: testTopics[:3], Sharing: Sharing{SoloReads: solo},
		NewSink: func(*FeedSpec) (Sink, error) { return sink, nil }})
	spec := FeedSpec{Name: "bench", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "127.0.0.1:9"}, Start: "earliest"}
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
	m, _ := runManager(b, Config{Client: br.ClientConfig(), Topics: testTopics[:3],
		NewSink: func(*FeedSpec) (Sink, error) { return sink, nil }})
	spec := FeedSpec{Name: "lat", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "127.0.0.1:9"}}
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
	f := m.feedSet()["lat"]
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

// BenchmarkXDRFeedStore is what keeping every transaction record searchable
// (xdrstore) adds to an xdr feed. An xdr feed reads b.N copies of nfsim's
// default mix, 3 KB, already in Kafka, from earliest into JSONL files, and
// its CPU is measured (the in-process broker's fetches included); then the
// records it wrote are stored as the feed hands them to the store (with
// their JSON), and that CPU is measured on its own. Storing them from the
// feed instead of afterwards differs only in where the queue is filled.
// Run with -benchtime=100000x.
func BenchmarkXDRFeedStore(b *testing.B) {
	ctx := context.Background()
	m, stop := nfsimBacklog(b, false)
	out := b.TempDir()
	spec := FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF", "SEPP"}, Start: "earliest",
		File: &FileSpec{Dir: out, Format: "jsonl", RotateSeconds: 1}, XDR: &XDRSpec{Timeout: "500ms"}}
	if err := m.Prepare(ctx, &spec); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	records, cpu, _ := runUntilQuiet(b, m, spec, b.N)
	b.StopTimer()
	stop() // the last file closed
	recs, raws := readRecords(b, out)
	if len(recs) == 0 || uint64(len(recs)) != records {
		b.Fatalf("%d records in the files, the feed made %d", len(recs), records)
	}
	storeCPU, stored := storeRecords(b, recs, raws)
	var size int
	for _, r := range raws {
		size += len(r)
	}
	feed := float64(cpu.Nanoseconds()) / 1e3 / float64(len(recs))
	store := float64(storeCPU.Nanoseconds()) / 1e3 / float64(len(recs))
	b.ReportMetric(float64(b.N)/float64(len(recs)), "copies/record")
	b.ReportMetric(float64(size)/float64(len(recs)), "B/record")
	b.ReportMetric(feed, "feed-cpu-µs/record")
	b.ReportMetric(store, "store-cpu-µs/record")
	b.ReportMetric(100*store/feed, "store-%")
	b.ReportMetric(float64(stored)/float64(len(recs)), "stored-B/record")
}

// nfsimBacklog starts an in-process broker holding b.N copies of nfsim's
// default mix, 3 KB, and a manager of it (creating topics if told), and
// returns the manager and what stops it.
func nfsimBacklog(b *testing.B, createTopics bool) (*Manager, func()) {
	ctx := context.Background()
	topics := append(slices.Clone(testTopics[:3]), broker.TopicSpec{Name: "SEPP", Partitions: 2})
	br, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", Topics: topics}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	st, err := nfsim.Run(ctx, nfsim.Config{Brokers: br.ClientConfig().Brokers, Count: int64(b.N), Size: 3000,
		Progress: time.Hour}, io.Discard)
	if err != nil || st.Total() != int64(b.N) {
		b.Fatalf("nfsim: %v, sent %d of %d", err, st.Total(), b.N)
	}
	var m *Manager
	m, stop := runManager(b, Config{Client: br.ClientConfig(), Topics: topics, Logger: benchLogger(), CreateTopics: createTopics,
		NewSink: func(spec *FeedSpec) (Sink, error) { return m.defaultSink(spec) }})
	return m, stop
}

// runUntilQuiet applies the xdr feed spec and waits until it read all n
// copies and made no record for a second (its last transactions time out within
// its timeout, under a second); it returns the records made, and the CPU
// and the time up to the last of them.
func runUntilQuiet(b *testing.B, m *Manager, spec FeedSpec, n int) (records uint64, cpu, elapsed time.Duration) {
	cpu0, start := testkit.CPUTime(), time.Now()
	if err := m.Apply(context.Background(), []FeedSpec{spec}); err != nil {
		b.Fatal(err)
	}
	for quiet := time.Now(); time.Since(quiet) < time.Second; time.Sleep(20 * time.Millisecond) {
		s, _ := m.Status(spec.Name)
		if s.Records != records || s.Lag != 0 || s.Delivered < uint64(n) {
			records, quiet, cpu, elapsed = s.Records, time.Now(), testkit.CPUTime()-cpu0, time.Since(start)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("records stopped at %d, lag %d", s.Records, s.Lag)
		}
	}
	return records, cpu, elapsed
}

// BenchmarkXDRFeedKafka is what exactly-once costs an xdr feed to a topic:
// b.N copies of nfsim's default mix, 3 KB, already in Kafka, read from
// earliest by an xdr feed at-least-once and exactly-once (transactions, and
// a checkpoint of the open transactions in each). CPU (the in-process
// broker's included) per record and records per second. Run with
// -benchtime=100000x.
func BenchmarkXDRFeedKafka(b *testing.B) {
	for _, once := range []bool{false, true} {
		b.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[once], func(b *testing.B) {
			ctx := context.Background()
			m, _ := nfsimBacklog(b, true)
			spec := FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF", "SEPP"}, Start: "earliest",
				KafkaSpec: KafkaSpec{Topic: "xdr.out"}, ExactlyOnce: once, XDR: &XDRSpec{Timeout: "500ms"}}
			if err := m.Prepare(ctx, &spec); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			records, cpu, elapsed := runUntilQuiet(b, m, spec, b.N)
			b.StopTimer()
			if records == 0 {
				b.Fatal("no records")
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(records), "cpu-µs/record")
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "copies/s")
		})
	}
}

// readRecords reads the records of an xdr feed's JSONL files in dir.
func readRecords(b *testing.B, dir string) (recs []xdr.Record, raws [][]byte) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			line = bytes.TrimSuffix(line, []byte("\n"))
			var r xdr.Record
			if err := json.Unmarshal(line, &r); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			recs, raws = append(recs, r), append(raws, line)
		}
	}
	return recs, raws
}

// storeRecords stores recs, with their JSON, in batches as an xdr feed hands
// them over, and returns the CPU it took (the last segment flushed) and the
// bytes on disk.
func storeRecords(b *testing.B, recs []xdr.Record, raws [][]byte) (time.Duration, int64) {
	dir := b.TempDir()
	s, err := xdrstore.Open(xdrstore.Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	runtime.GC()
	cpu0 := testkit.CPUTime()
	go func() { s.Run(ctx); close(done) }()
	const batch = 256
	for i := 0; i < len(recs); i += batch {
		j := min(i+batch, len(recs))
		s.Append(recs[i:j], raws[i:j])
	}
	stop()
	<-done
	cpu := testkit.CPUTime() - cpu0
	var stored int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			stored += fi.Size()
		}
	}
	return cpu, stored
}

func benchLogger() *slog.Logger {
	if os.Getenv("DIRECTOR_BENCH_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}
