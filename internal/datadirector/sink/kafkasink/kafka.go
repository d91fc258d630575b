// Package kafkasink delivers copies into a Kafka topic (the director's own
// brokers or an external cluster): each copy's raw record, keyed by its
// correlation id so a transaction stays in one partition.
//
// A record the target can never take (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE)
// is set aside (Rejected) rather than failing its batch, so one oversized
// copy cannot hold a feed in a retry loop; the feed sends it to the
// dead-letter topic. When a batch fails for a passing reason (the broker is
// down), the records of it and of the batches after it that were
// acknowledged are not produced again when the feed writes them again.
package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/health"
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
	cl           *kgo.Client
	topic        string
	log          *slog.Logger
	health.State // Connected (the last Send succeeded), Retries (failed Sends), LastError

	create     bool
	partitions int
	ensured    atomic.Bool

	ccfg broker.ClientConfig
	solo *kgo.Client // produces a record refused as too large once more, alone

	fmu      sync.Mutex
	next     uint64    // the last ticket
	flights  []*flight // written, not yet confirmed; oldest first
	acked    map[*nfcopy.Copy]struct{}
	rejected []*nfcopy.Copy // set aside, of confirmed batches, until Rejected
	reasons  []string
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
		create: cfg.CreateTopic, partitions: cfg.Partitions, ccfg: cfg.Client}
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
// A copy acknowledged in a batch that failed is not produced again.
func (s *Sink) Write(ctx context.Context, batch []*nfcopy.Copy) (uint64, error) {
	return s.WriteWithHeaders(ctx, batch, nil)
}

// WriteWithHeaders is Write with headers for each copy's record (hdrs[i]
// for batch[i]; nil: none).
func (s *Sink) WriteWithHeaders(ctx context.Context, batch []*nfcopy.Copy, hdrs [][]kgo.RecordHeader) (uint64, error) {
	fl, err := s.write(ctx, batch, hdrs)
	if err != nil {
		return 0, err
	}
	return fl.ticket, nil
}

func (s *Sink) write(ctx context.Context, batch []*nfcopy.Copy, hdrs [][]kgo.RecordHeader) (*flight, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	fl := &flight{copies: make([]*nfcopy.Copy, 0, len(batch)), recs: make([]*kgo.Record, 0, len(batch)), done: make(chan struct{})}
	s.fmu.Lock()
	s.next++
	fl.ticket = s.next
	for i, c := range batch {
		if _, ok := s.acked[c]; ok {
			delete(s.acked, c) // delivered before its batch failed
			continue
		}
		r := &kgo.Record{Topic: s.topic, Value: c.Raw, Offset: -1}
		if hdrs != nil {
			r.Headers = hdrs[i]
		}
		if c.CorrelationID != "" {
			r.Key = []byte(c.CorrelationID)
		}
		fl.copies, fl.recs = append(fl.copies, c), append(fl.recs, r)
	}
	fl.left = len(fl.recs)
	if fl.left == 0 {
		close(fl.done)
	}
	s.flights = append(s.flights, fl)
	s.fmu.Unlock()
	done := func(r *kgo.Record, err error) {
		s.fmu.Lock()
		defer s.fmu.Unlock()
		fl.left--
		switch {
		case err == nil:
		case broker.IsTooLarge(err):
			fl.tooLarge = append(fl.tooLarge, r)
		default:
			r.Offset = -1
			if fl.err == nil {
				fl.err = err
			}
		}
		if fl.left == 0 {
			close(fl.done)
		}
	}
	for _, r := range fl.recs {
		s.cl.Produce(ctx, r, done)
	}
	return fl, nil
}

// Confirmed reports whether every record of the batches up to ticket t is
// acknowledged or set aside as too large. The first record failed for
// another reason fails its batch: every batch written since the last
// confirmed one is then forgotten, and the feed writes them again; what of
// them was acknowledged is remembered and not produced again.
func (s *Sink) Confirmed(t uint64) (bool, error) {
	s.fmu.Lock()
	for len(s.flights) > 0 && s.flights[0].left == 0 && s.flights[0].err == nil {
		if !s.setAside(s.flights[0]) {
			break
		}
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
		// The feed writes every pending batch again: remember what of them
		// the broker has (records still in flight may land twice).
		for _, fl := range s.flights {
			for i, r := range fl.recs {
				if r.Offset >= 0 {
					if s.acked == nil {
						s.acked = make(map[*nfcopy.Copy]struct{})
					}
					s.acked[fl.copies[i]] = struct{}{}
				}
			}
		}
		clear(s.flights)
		s.flights = s.flights[:0]
	}
	ok := err == nil && (len(s.flights) == 0 || s.flights[0].ticket > t)
	if len(s.flights) == 0 && err == nil {
		clear(s.acked) // nothing will be written again
	}
	s.fmu.Unlock()
	if err != nil {
		return false, s.failed(err)
	}
	if ok {
		s.SetConnected(true)
	}
	return ok, nil
}

// setAside settles a finished flight's records refused as too large. The
// broker refuses a whole produce batch when it is over its limit, so a
// small record batched with a big one is refused too: each is produced once
// more, alone, and only one refused again is set aside (s.rejected). It
// reports false when that produce failed for another reason: the flight
// has then failed (fl.err) and is written again. s.fmu is held; it is let
// go while the records are produced again, so that the other flights'
// acknowledgements are not held up (only Confirmed's caller touches a
// finished flight).
func (s *Sink) setAside(fl *flight) bool {
	if len(fl.tooLarge) == 0 {
		return true
	}
	if s.solo == nil {
		cl, err := s.ccfg.NewClient(kgo.DefaultProduceTopic(s.topic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10*time.Second))
		if err != nil {
			fl.err = err
			return false
		}
		s.solo = cl
	}
	n := 0
	for _, r := range fl.tooLarge {
		i := slices.Index(fl.recs, r)
		solo := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		s.fmu.Unlock()
		err := s.solo.ProduceSync(ctx, solo).FirstErr()
		s.fmu.Lock()
		cancel()
		switch {
		case err == nil:
			r.Offset = solo.Offset
		case broker.IsTooLarge(err):
			s.rejected = append(s.rejected, fl.copies[i])
			s.reasons = append(s.reasons, fmt.Sprintf("record of %d bytes too large for topic %s on the target brokers: %v", len(r.Value), s.topic, err))
			n++
		default:
			fl.err = err
			return false
		}
	}
	fl.tooLarge = nil
	if n > 0 {
		s.log.Warn("kafka sink: records too large for the target set aside for the dead-letter topic", "count", n)
	}
	return true
}

// Rejected returns, and forgets, the copies of confirmed batches that the
// target can never take, with why (director.RejectingSink).
func (s *Sink) Rejected() ([]*nfcopy.Copy, []string) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	cs, rs := s.rejected, s.reasons
	s.rejected, s.reasons = nil, nil
	return cs, rs
}

// flight is one written batch awaiting its acknowledgements.
type flight struct {
	ticket   uint64
	left     int
	err      error          // the first failure other than too large
	copies   []*nfcopy.Copy // produced, in order of recs
	recs     []*kgo.Record  // Offset >= 0 once acknowledged
	tooLarge []*kgo.Record  // refused as too large
	done     chan struct{}  // closed when every record is answered
}

// Send produces the batch and returns once the broker acknowledged every
// record (or set it aside as too large: Rejected), or with the first error.
func (s *Sink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	if len(batch) == 0 {
		return nil
	}
	fl, err := s.write(ctx, batch, nil)
	if err != nil {
		return err
	}
	select {
	case <-fl.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	ok, err := s.Confirmed(fl.ticket)
	if err == nil && !ok {
		err = errors.New("kafka sink: an earlier write is not confirmed") // Send and Write are not mixed
	}
	return err
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
	s.Retried()
	s.setErr(err)
	if broker.IsTooLarge(err) {
		return fmt.Errorf("kafka sink %s: record too large for the target broker: %w", s.topic, err)
	}
	return fmt.Errorf("kafka sink %s: %w", s.topic, err)
}

// setErr marks the sink not connected, with err as its last error.
func (s *Sink) setErr(err error) {
	s.SetConnected(false)
	s.SetErr(err)
}

// Close closes the client; records still in flight fail (their batches are
// not confirmed, so the feed's next run sends them again).
func (s *Sink) Close() error {
	s.cl.Close()
	if s.solo != nil {
		s.solo.Close()
	}
	return nil
}
