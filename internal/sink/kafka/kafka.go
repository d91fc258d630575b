// Package kafkasink delivers copies into a Kafka topic (the director's own
// brokers or an external cluster): each copy's raw record, keyed by its
// correlation id so a transaction stays in one partition.
package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/copy"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Sink.
type Config struct {
	Client broker.ClientConfig
	Topic  string
	Logger *slog.Logger
	// Linger batches records for up to this long (default 1ms); Send still
	// waits for every acknowledgement.
	Linger time.Duration
	// CreateTopic creates the topic (with Partitions, default 6) before the
	// first send if it does not exist; otherwise a missing topic is an error
	// the feed reports and retries.
	CreateTopic bool
	Partitions  int
}

// Sink produces copies to one topic.
type Sink struct {
	cl      *kgo.Client
	topic   string
	log     *slog.Logger
	retries atomic.Uint64
	ok      atomic.Bool

	create     bool
	partitions int
	ensured    atomic.Bool

	mu      sync.Mutex
	lastErr string
}

// New builds a Sink. It does not dial: a broker that is down shows up as Send
// errors, which the feed retries.
func New(cfg Config) (*Sink, error) {
	if cfg.Topic == "" {
		return nil, errors.New("kafka sink: no topic")
	}
	if err := broker.ValidateTopicName(cfg.Topic); err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Linger == 0 {
		cfg.Linger = time.Millisecond
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 6
	}
	s := &Sink{topic: cfg.Topic, log: cfg.Logger.With("sink", "kafka", "topic", cfg.Topic),
		create: cfg.CreateTopic, partitions: cfg.Partitions}
	cl, err := cfg.Client.NewClient(
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerLinger(cfg.Linger),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// A failed batch comes back to the feed, which retries it with
		// backoff; bounded here so Send returns instead of hanging.
		kgo.RecordDeliveryTimeout(30*time.Second),
		kgo.MaxBufferedRecords(1<<16),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: %w", err)
	}
	s.cl = cl
	return s, nil
}

// Send produces the batch and returns once the broker acknowledged every
// record, or with the first error.
func (s *Sink) Send(ctx context.Context, batch []*copy.Copy) error {
	if len(batch) == 0 {
		return nil
	}
	if s.create && !s.ensured.Load() {
		if err := broker.EnsureTopics(ctx, s.cl, []broker.TopicSpec{{Name: s.topic, Partitions: s.partitions}}, true); err != nil {
			err = fmt.Errorf("kafka sink %s: creating the topic: %w", s.topic, err)
			s.ok.Store(false)
			s.mu.Lock()
			s.lastErr = err.Error()
			s.mu.Unlock()
			return err
		}
		s.ensured.Store(true)
	}
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	wg.Add(len(batch))
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			errMu.Lock()
			if first == nil {
				first = err
			}
			errMu.Unlock()
		}
		wg.Done()
	}
	for _, c := range batch {
		// The copy's buffers stay alive until wg.Wait returns, so the
		// record may alias them.
		r := &kgo.Record{Topic: s.topic, Value: c.Raw}
		if c.CorrelationID != "" {
			r.Key = []byte(c.CorrelationID)
		}
		s.cl.Produce(ctx, r, done)
	}
	wg.Wait()
	if first != nil {
		s.ok.Store(false)
		s.retries.Add(1)
		s.mu.Lock()
		s.lastErr = first.Error()
		s.mu.Unlock()
		if broker.IsTooLarge(first) {
			return fmt.Errorf("kafka sink %s: record too large for the target broker: %w", s.topic, first)
		}
		return fmt.Errorf("kafka sink %s: %w", s.topic, first)
	}
	s.ok.Store(true)
	return nil
}

// Close flushes nothing (Send already waited) and closes the client.
func (s *Sink) Close() error {
	s.cl.Close()
	return nil
}

// Connected reports whether the last Send succeeded.
func (s *Sink) Connected() bool { return s.ok.Load() }

// Retries counts failed Sends.
func (s *Sink) Retries() uint64 { return s.retries.Load() }

// LastError is the last Send error.
func (s *Sink) LastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}
