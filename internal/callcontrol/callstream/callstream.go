// Package callstream produces every CURRI decision as a call record
// (internal/callcontrol/callrecord) into a Kafka topic, CALLS by default, of the
// embedded broker or the operator's cluster, for SIEMs, fraud analytics and
// the director's feeds. A call never waits for it: decisions are queued
// after the answer is written, in a bounded queue that drops and counts
// when full, and the producer's own buffer is bounded the same way; an
// unreachable broker costs records (counted, alarmed), never call time.
package callstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

// Config configures a Stream.
type Config struct {
	Client broker.ClientConfig
	Topic  string // default CALLS
	// Queue bounds the records waiting to be encoded, and again those
	// produced but not yet acknowledged; default 65536 each.
	Queue int
	// Linger is how often queued records are handed to the producer, and
	// how long the producer then holds a batch before sending it; default
	// 50 ms, so a record reaches the broker within about twice that. Call
	// records are telemetry: that delay is nothing to their readers, while at
	// 15,000 calls/s a batch per partition every millisecond or so was
	// thousands of produce requests a second for the box to encode, carry
	// and store, on the cores the calls are answered on.
	Linger time.Duration
	// DeliveryTimeout is how long a record may wait for the broker before
	// it is dropped; default 10 s.
	DeliveryTimeout time.Duration
	Registerer      prometheus.Registerer
	Logger          *slog.Logger
}

// DefaultTopic is the topic call records go to unless configured.
const DefaultTopic = "CALLS"

// Stream queues call records and produces them.
type Stream struct {
	cfg Config
	cl  *kgo.Client
	log *slog.Logger

	mu      sync.Mutex
	pending []callrecord.Record
	kick    chan struct{}

	produced, dropped, failed prometheus.Counter
	droppedN                  atomic.Int64 // drops (queue full, buffer full, broker errors) since Lost last looked
	lastErr                   atomic.Value // string
}

// New builds a Stream; it does not dial (a broker that is down shows as
// failed records).
func New(cfg Config) (*Stream, error) {
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if err := broker.ValidateTopicName(cfg.Topic); err != nil {
		return nil, fmt.Errorf("calls stream: %w", err)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1 << 16
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 50 * time.Millisecond
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cl, err := cfg.Client.NewClient(
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.MaxBufferedRecords(cfg.Queue),
	)
	if err != nil {
		return nil, fmt.Errorf("calls stream: %w", err)
	}
	s := &Stream{cfg: cfg, cl: cl, log: cfg.Logger.With("component", "callstream", "topic", cfg.Topic),
		pending: make([]callrecord.Record, 0, 1024), kick: make(chan struct{}, 1),
		produced: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calls_stream_produced_total",
			Help: "Call records the Kafka broker acknowledged."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calls_stream_dropped_total",
			Help: "Call records dropped because the queue or the producer's buffer was full (the broker slow or unreachable)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calls_stream_failed_total",
			Help: "Call records the broker did not acknowledge in time or refused (dropped)."}),
	}
	s.lastErr.Store("")
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.produced, s.dropped, s.failed,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "signalbox_calls_stream_queue_length",
				Help: "Call records waiting to be produced."}, func() float64 { return float64(s.queued()) })} {
			if err := cfg.Registerer.Register(c); err != nil {
				cl.Close()
				return nil, fmt.Errorf("calls stream: register metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Topic is the topic records go to.
func (s *Stream) Topic() string { return s.cfg.Topic }

// Record queues one call record. It never blocks: a full queue drops it,
// counted.
func (s *Stream) Record(r *callrecord.Record) {
	s.mu.Lock()
	if len(s.pending) >= s.cfg.Queue {
		s.mu.Unlock()
		s.dropped.Inc()
		s.droppedN.Add(1)
		return
	}
	s.pending = append(s.pending, *r)
	n := len(s.pending)
	s.mu.Unlock()
	if n == 1024 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Stream) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) + int(s.cl.BufferedProduceRecords())
}

// Lost returns how many records were lost since it was last called, and
// the last producer error: the app's alarm watcher reads it.
func (s *Stream) Lost() (int64, string) {
	return s.droppedN.Swap(0), s.lastErr.Load().(string)
}

// Run hands queued records to the producer every Linger (or when 1,024 are
// waiting) until ctx ends, then flushes what is queued within timeout and
// closes the client.
func (s *Stream) Run(ctx context.Context, flushTimeout time.Duration) {
	t := time.NewTicker(s.cfg.Linger)
	defer t.Stop()
	var spare []callrecord.Record
	for {
		select {
		case <-ctx.Done():
			spare = s.produce(s.take(spare))
			fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			if err := s.cl.Flush(fctx); err != nil {
				s.log.Warn("calls stream: records not flushed at shutdown", "buffered", s.cl.BufferedProduceRecords(), "err", err)
			}
			cancel()
			s.cl.Close()
			return
		case <-t.C:
		case <-s.kick:
		}
		spare = s.produce(s.take(spare))
	}
}

func (s *Stream) take(spare []callrecord.Record) []callrecord.Record {
	s.mu.Lock()
	out := s.pending
	s.pending = spare[:0]
	s.mu.Unlock()
	return out
}

// produce encodes recs and hands them to the producer without waiting: a
// full producer buffer drops the record.
func (s *Stream) produce(recs []callrecord.Record) []callrecord.Record {
	for i := range recs {
		r := &recs[i]
		kr := &kgo.Record{Value: callrecord.AppendJSON(make([]byte, 0, 384), r)}
		if r.Calling != "" {
			kr.Key = []byte(r.Calling) // one caller's calls stay in order, on one partition
		}
		s.cl.TryProduce(context.Background(), kr, s.done)
	}
	clear(recs)
	return recs
}

func (s *Stream) done(_ *kgo.Record, err error) {
	switch {
	case err == nil:
		s.produced.Inc()
	case errors.Is(err, kgo.ErrMaxBuffered):
		s.dropped.Inc()
		s.droppedN.Add(1)
		s.lastErr.Store("the producer's buffer is full (the broker is slow or unreachable)")
	default:
		s.failed.Inc()
		s.droppedN.Add(1)
		s.lastErr.Store(err.Error())
	}
}

// recentTimeout bounds Recent: a console poll, not a wait.
const recentTimeout = 5 * time.Second

// Recent reads the newest n call records of the topic, from every node,
// newest first: the console's live view of the stream. It reads the last
// n records of each partition and keeps the n newest by time; within
// recentTimeout, or it answers an error rather than an empty stream.
func (s *Stream) Recent(ctx context.Context, n int) ([]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, recentTimeout)
	defer cancel()
	adm := kadm.NewClient(s.cl)
	starts, err := adm.ListStartOffsets(ctx, s.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("calls stream: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, s.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("calls stream: %w", err)
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{} // partition -> end offset
	ends.Each(func(e kadm.ListedOffset) {
		st, _ := starts.Lookup(e.Topic, e.Partition)
		if e.Err != nil || e.Offset <= st.Offset {
			return
		}
		from[e.Partition] = kgo.NewOffset().At(max(st.Offset, e.Offset-int64(n)))
		want[e.Partition] = e.Offset
	})
	if len(from) == 0 {
		return []json.RawMessage{}, nil
	}
	cl, err := s.cfg.Client.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: from}))
	if err != nil {
		return nil, fmt.Errorf("calls stream: %w", err)
	}
	defer cl.Close()
	type rec struct {
		at  time.Time
		raw json.RawMessage
	}
	var recs []rec
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			if len(recs) == 0 {
				// Records are there, none came: a slow or unreachable
				// broker, not an empty stream.
				return nil, fmt.Errorf("calls stream: no record read within %s from the %d partitions that hold some", recentTimeout, len(want))
			}
			break // what was read so far
		}
		fs.EachRecord(func(r *kgo.Record) {
			// By the decision's own time: records of one produce batch
			// share a Kafka timestamp.
			var t struct {
				Time time.Time `json:"time"`
			}
			if json.Unmarshal(r.Value, &t) != nil {
				t.Time = r.Timestamp
			}
			recs = append(recs, rec{t.Time, append(json.RawMessage(nil), r.Value...)})
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	slices.SortFunc(recs, func(a, b rec) int { return b.at.Compare(a.at) })
	out := make([]json.RawMessage, 0, min(n, len(recs)))
	for _, r := range recs[:min(n, len(recs))] {
		out = append(out, r.raw)
	}
	return out, nil
}
