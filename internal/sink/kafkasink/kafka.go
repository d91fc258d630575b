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
	"github.com/signalbox/signalbox/internal/nfcopy"
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

	fmu     sync.Mutex
	next    uint64    // the last ticket
	flights []*flight // written, not yet confirmed; oldest first
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

// Write produces batch and returns its ticket without waiting for the
// broker: Confirmed tells when every record of the batch, and of every batch
// before it, is acknowledged. The records alias the copies' Raw, which the
// feed keeps until the ticket is confirmed or fails (director.PipelinedSink).
// A feed thus has its next batches in flight while the broker acknowledges
// the previous one, instead of one produce round trip (and linger) per batch.
func (s *Sink) Write(ctx context.Context, batch []*nfcopy.Copy) (uint64, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	fl := &flight{left: len(batch)}
	s.fmu.Lock()
	s.next++
	fl.ticket = s.next
	s.flights = append(s.flights, fl)
	s.fmu.Unlock()
	done := func(_ *kgo.Record, err error) {
		s.fmu.Lock()
		fl.left--
		if err != nil && fl.err == nil {
			fl.err = err
		}
		s.fmu.Unlock()
	}
	s.produce(ctx, batch, done)
	return fl.ticket, nil
}

// produce hands every copy of batch to the client as a record keyed by its
// correlation id; done is called for each once the broker answered. The
// records alias the copies' Raw.
func (s *Sink) produce(ctx context.Context, batch []*nfcopy.Copy, done func(*kgo.Record, error)) {
	for _, c := range batch {
		r := &kgo.Record{Topic: s.topic, Value: c.Raw}
		if c.CorrelationID != "" {
			r.Key = []byte(c.CorrelationID)
		}
		s.cl.Produce(ctx, r, done)
	}
}

// Confirmed reports whether every record of the batches up to ticket t is
// acknowledged. The first failed record fails its batch: every batch written
// since the last confirmed one is then forgotten, and the feed writes them
// again (records of theirs still in flight may land twice: at-least-once).
func (s *Sink) Confirmed(t uint64) (bool, error) {
	s.fmu.Lock()
	for len(s.flights) > 0 && s.flights[0].left == 0 && s.flights[0].err == nil {
		s.flights[0] = nil
		s.flights = s.flights[1:]
	}
	var err error
	for _, fl := range s.flights {
		if fl.ticket > t {
			break
		}
		if fl.err != nil {
			err = fl.err
			break
		}
	}
	if err != nil {
		clear(s.flights)
		s.flights = s.flights[:0]
	}
	ok := err == nil && (len(s.flights) == 0 || s.flights[0].ticket > t)
	s.fmu.Unlock()
	if err != nil {
		return false, s.failed(err)
	}
	if ok {
		s.ok.Store(true)
	}
	return ok, nil
}

// flight is one written batch awaiting its acknowledgements.
type flight struct {
	ticket uint64
	left   int
	err    error
}

// Send produces the batch and returns once the broker acknowledged every
// record, or with the first error.
func (s *Sink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	if len(batch) == 0 {
		return nil
	}
	if err := s.ensure(ctx); err != nil {
		return err
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
	// The copies' buffers stay alive until wg.Wait returns, so the records
	// may alias them.
	s.produce(ctx, batch, done)
	wg.Wait()
	if first != nil {
		return s.failed(first)
	}
	s.ok.Store(true)
	return nil
}

// ensure creates the topic before the first send, when configured to.
func (s *Sink) ensure(ctx context.Context) error {
	if !s.create || s.ensured.Load() {
		return nil
	}
	if err := broker.EnsureTopics(ctx, s.cl, []broker.TopicSpec{{Name: s.topic, Partitions: s.partitions}}, true); err != nil {
		err = fmt.Errorf("kafka sink %s: creating the topic: %w", s.topic, err)
		s.setErr(err)
		return err
	}
	s.ensured.Store(true)
	return nil
}

// failed records a failed delivery and returns its error.
func (s *Sink) failed(err error) error {
	s.retries.Add(1)
	s.setErr(err)
	if broker.IsTooLarge(err) {
		return fmt.Errorf("kafka sink %s: record too large for the target broker: %w", s.topic, err)
	}
	return fmt.Errorf("kafka sink %s: %w", s.topic, err)
}

// setErr marks the sink not connected, with err as its last error.
func (s *Sink) setErr(err error) {
	s.ok.Store(false)
	s.mu.Lock()
	s.lastErr = err.Error()
	s.mu.Unlock()
}

// Close closes the client; records still in flight fail (their batches are
// not confirmed, so the feed's next run sends them again).
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
