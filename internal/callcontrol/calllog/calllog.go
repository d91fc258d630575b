// Package calllog is the asynchronous CURRI decision log: a bounded queue
// that never blocks a call (a full queue drops and counts), a batch writer to
// the store, retention pruning by age and row count, and search.
package calllog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/platform/store"
)

// Config tunes the log. Zero fields take the defaults.
type Config struct {
	QueueSize int // records held in memory awaiting write; default 65536
	BatchSize int // records per store write; default 5000
	// FlushInterval is the longest a record waits before a write; default
	// 1s. Each write is one stored segment, so at low call rates this sets
	// how many segments a day of log is cut into (86,400 at most).
	FlushInterval time.Duration
	MaxAge        time.Duration // records older than this are pruned; default 7 days
	MaxRows       int64         // at most this many records are kept; default 10,000,000
	PruneInterval time.Duration // how often retention runs; default 1 minute
	// ShutdownTimeout bounds the final flush when Run's context ends;
	// default 5s.
	ShutdownTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.QueueSize <= 0 {
		c.QueueSize = 65536
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 5000
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.MaxRows <= 0 {
		c.MaxRows = 10_000_000
	}
	if c.PruneInterval <= 0 {
		c.PruneInterval = time.Minute
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	return c
}

// opTimeout bounds one batch write or prune, so a hung database cannot stop
// the writer for good.
const opTimeout = time.Minute

// Store is the part of store.Store the log needs.
type Store interface {
	InsertCalls(ctx context.Context, calls []store.CallRecord) error
	SearchCalls(ctx context.Context, q store.CallQuery) ([]store.CallRecord, error)
	PruneCalls(ctx context.Context, before time.Time, maxRows int64) (int64, error)
}

// Log queues decisions and writes them in batches. Record is safe for
// concurrent use; Run is called once.
type Log struct {
	st  Store
	cfg Config
	log *slog.Logger

	// The queue is a slice under a mutex rather than a channel: a channel
	// receive in Run would wake the writer goroutine for every call (a futex
	// wake and a reschedule per call). Record only
	// wakes Run when a whole batch is waiting; otherwise Run takes what has
	// queued every FlushInterval.
	mu      sync.Mutex
	pending []store.CallRecord
	kick    chan struct{}      // capacity 1
	flushed chan chan struct{} // Search asks Run to write what is queued now

	written  prometheus.Counter
	dropped  prometheus.Counter
	errs     prometheus.Counter
	pruned   prometheus.Counter
	droppedN atomic.Int64 // since the last warning, to log drops once per flush, not per call
}

// New builds a Log writing to st. Metrics go on reg (nil: not registered).
func New(st store.Store, cfg Config, reg prometheus.Registerer, log *slog.Logger) *Log {
	return newLog(st, cfg, reg, log)
}

func newLog(st Store, cfg Config, reg prometheus.Registerer, log *slog.Logger) *Log {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		st:      st,
		cfg:     cfg,
		log:     log.With("component", "calllog"),
		pending: make([]store.CallRecord, 0, cfg.BatchSize),
		kick:    make(chan struct{}, 1),
		flushed: make(chan chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calllog_written_total",
			Help: "Call decisions written to the store."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calllog_dropped_total",
			Help: "Call decisions dropped: queue full, or a failed write."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calllog_write_errors_total",
			Help: "Failed batch writes of call decisions."}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_calllog_pruned_total",
			Help: "Call decisions deleted by retention."}),
	}
	if reg != nil {
		reg.MustRegister(l.written, l.dropped, l.errs, l.pruned,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "signalbox_calllog_queue_length",
				Help: "Call decisions queued for writing."}, func() float64 { return float64(l.queued()) }))
	}
	return l
}

// Record queues one decision. It never blocks: when the queue is full the
// record is dropped and counted. A zero Time is set to now.
func (l *Log) Record(rec store.CallRecord) {
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	l.mu.Lock()
	if len(l.pending) >= l.cfg.QueueSize {
		l.mu.Unlock()
		l.dropped.Inc()
		l.droppedN.Add(1)
		return
	}
	l.pending = append(l.pending, rec)
	batchReady := len(l.pending) == l.cfg.BatchSize
	l.mu.Unlock()
	if batchReady {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *Log) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// take swaps the queue with spare (emptied) and returns what was queued.
func (l *Log) take(spare []store.CallRecord) []store.CallRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.pending
	l.pending = spare[:0]
	return out
}

// Search reads the log, with what is queued written first: a call decided
// just before finds itself (a CURRI request, then the call log at once),
// not up to FlushInterval later. Waiting for Run is bounded (two flush
// intervals at most, or ctx); past it the search reads what is written.
func (l *Log) Search(ctx context.Context, q store.CallQuery) ([]store.CallRecord, error) {
	if l.queued() > 0 {
		done := make(chan struct{})
		t := time.NewTimer(2 * l.cfg.FlushInterval)
		select {
		case l.flushed <- done:
			select {
			case <-done:
			case <-t.C:
			case <-ctx.Done():
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return l.st.SearchCalls(ctx, q)
}

// Run writes queued records in batches (when BatchSize are queued or
// FlushInterval has passed) and prunes on PruneInterval, until ctx ends.
// Then it flushes what is queued, bounded by ShutdownTimeout, and returns
// nil; records still queued after that are counted as dropped.
func (l *Log) Run(ctx context.Context) error {
	// Writes and prunes in flight finish even if ctx ends meanwhile: a
	// cancelled write would lose its whole batch. Each is bounded on its own.
	wctx := context.WithoutCancel(ctx)
	spare := make([]store.CallRecord, 0, l.cfg.BatchSize)
	flushT := time.NewTicker(l.cfg.FlushInterval)
	defer flushT.Stop()
	pruneT := time.NewTicker(l.cfg.PruneInterval)
	defer pruneT.Stop()
	l.prune(wctx)
	for {
		select {
		case <-l.kick:
			spare = l.writeAll(wctx, l.take(spare))
		case <-flushT.C:
			spare = l.writeAll(wctx, l.take(spare))
		case done := <-l.flushed:
			spare = l.writeAll(wctx, l.take(spare))
			close(done)
		case <-pruneT.C:
			l.prune(wctx)
		case <-ctx.Done():
			return l.shutdown(spare)
		}
	}
}

func (l *Log) shutdown(spare []store.CallRecord) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ShutdownTimeout)
	defer cancel()
	for {
		recs := l.take(spare)
		if len(recs) == 0 {
			return nil
		}
		spare = l.writeAll(ctx, recs)
		if ctx.Err() != nil {
			n := l.queued()
			l.dropped.Add(float64(n))
			l.log.Warn("call log shutdown timed out", "dropped", n)
			return nil
		}
	}
}

// writeAll writes recs in batches of BatchSize and returns recs emptied,
// for reuse.
func (l *Log) writeAll(ctx context.Context, recs []store.CallRecord) []store.CallRecord {
	for i := 0; i < len(recs); i += l.cfg.BatchSize {
		l.write(ctx, recs[i:min(len(recs), i+l.cfg.BatchSize)])
	}
	if n := l.droppedN.Swap(0); n > 0 {
		l.log.Warn("call log queue full, records dropped", "dropped", n, "queue_size", l.cfg.QueueSize)
	}
	clear(recs) // let the strings go
	return recs[:0]
}

// write stores a batch. A failed batch is dropped and counted rather than
// retried: the queue behind it keeps filling, and a store that is down would
// otherwise turn into unbounded memory.
func (l *Log) write(ctx context.Context, batch []store.CallRecord) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	err := l.st.InsertCalls(ctx, batch)
	cancel()
	if err != nil {
		l.errs.Inc()
		l.dropped.Add(float64(len(batch)))
		l.log.Error("call log write failed", "records", len(batch), "err", err)
	} else {
		l.written.Add(float64(len(batch)))
	}
}

func (l *Log) prune(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n, err := l.st.PruneCalls(ctx, time.Now().Add(-l.cfg.MaxAge), l.cfg.MaxRows)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			l.log.Error("call log prune failed", "err", fmt.Errorf("max_age %s, max_rows %d: %w", l.cfg.MaxAge, l.cfg.MaxRows, err))
		}
		return
	}
	l.pruned.Add(float64(n))
	if n > 0 {
		l.log.Debug("call log pruned", "deleted", n)
	}
}
