package director

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// feed is one running feed: a consumer group, a sink, and the loop between.
// Its parts (embedded, so their fields read as the feed's): what it has
// counted, its Prometheus series, its state as Status reports it, and its
// own reader, used when it does not read through its sources' tap.
type feed struct {
	m     *Manager
	spec  runPlan
	key   string
	group string
	log   *slog.Logger
	dirs  [8]bool // by nfcopy.Direction; all true when the spec names none
	// calls: the feed carries call records (its source is the calls
	// topic), read on its own reader and decoded into callRec.
	calls      bool
	callRec    callrecord.Record
	sequencing bool // Sequencing "transaction": take orders each batch (pollBatch.seq)

	feedCounts
	feedSeries
	feedState

	cancel context.CancelFunc
	done   chan struct{}

	// consumer-side state, owned by the loop; led also by the group
	// callbacks and the tap.
	sink sinkCaps // the sink and its capabilities; its Sink nil until built
	led  *ledger  // the feed's offsets on this node, kept across its incarnations
	ownReader

	// filters and xdr (filtering.go, xdrfeed.go)
	filt *feedFilter
	xsp  atomic.Pointer[xdrStage] // set by the feed's goroutine, read by status
}

// feedCounts is what a feed has counted since it started (Status).
type feedCounts struct {
	delivered, bytes, failed, retries, lost, redelivered, invalid, undelivered, incomplete, reordered atomic.Uint64
	matched, filteredOut, records                                                                     atomic.Uint64
	lag                                                                                               atomic.Int64
}

// feedSeries are the feed's Prometheus series.
type feedSeries struct {
	mDelivered, mBytes, mFailed, mRetries, mLost, mRedelivered prometheus.Counter
	mLag, mConnected                                           prometheus.Gauge
	mLatency                                                   prometheus.Observer
	mEvicted                                                   prometheus.Counter // synthetic feeds: flows pushed out of the table
	evictedSeen                                                atomic.Uint64      // the sink's FlowsEvicted at the last look
	mRespFirst                                                 prometheus.Counter // synthetic feeds: responses written before their request
	respFirstSeen                                              atomic.Uint64      // the sink's ResponsesFirst at the last look
}

// feedState is the feed's state as Status reports it, under mu.
type feedState struct {
	mu        sync.Mutex
	state     string
	reader    string // ReaderShared or ReaderOwn, once reading
	lastErr   string
	lastErrAt time.Time
	since     time.Time
	hist      *hdrhistogram.WindowedHistogram // µs
	// latency is what status last read of hist, at latencyAt: merging
	// the windows costs ~0.5 ms, under the lock deliveries record in, so
	// a status read does it at most once per latencyRefresh.
	latency   FeedLatency
	latencyAt time.Time
}

// latencyRefresh is how old a feed's latency figures in its status may be.
const latencyRefresh = time.Second

// ownReader is the feed's own reader: its client and its group membership
// (the member id of the last assignment taken, and when it was last
// proven). Partitions it kept across a new membership, to move to their
// commits before the next poll, are its ledger's (ledger.keep).
type ownReader struct {
	cl    *kgo.Client
	mship membership
	// commitMu: one commit from the ledger at a time (commitOwn, and the
	// tap's for the feed, tapMember.commitOffsets), so that they land in
	// order.
	commitMu sync.Mutex
}

func (m *Manager) newFeed(s runPlan) *feed {
	f := &feed{
		m: m, spec: s, key: s.key(), group: m.cfg.GroupPrefix + s.Name,
		log:       m.log.With("feed", s.Name),
		feedState: feedState{state: StateStarting, since: time.Now(), hist: hdrhistogram.NewWindowed(6, 1, 600_000_000, 3)},
		led:       m.ledger(s.Name),
	}
	if len(s.Directions) == 0 {
		for i := range f.dirs {
			f.dirs[i] = true
		}
	}
	for _, d := range s.Directions {
		f.dirs[nfcopy.ParseDirection(d)] = true
	}
	if s.Sequencing == SequencingTransaction {
		f.sequencing = true
	}
	l := prometheus.Labels{"feed": s.Name}
	mt := m.m
	f.mDelivered, f.mBytes = mt.delivered.With(l), mt.deliveredBytes.With(l)
	f.mFailed, f.mRetries = mt.failures.With(l), mt.retries.With(l)
	f.mLost, f.mRedelivered = mt.lost.With(l), mt.redelivered.With(l)
	f.mLag, f.mConnected, f.mLatency = mt.lag.With(l), mt.connected.With(l), mt.latency.With(l)
	if s.Type == TypeSynthetic {
		f.mEvicted, f.mRespFirst = mt.flowsEvicted.With(l), mt.responsesFirst.With(l)
	}
	f.calls = m.isCallsFeed(&s.FeedSpec)
	f.initFilter()
	return f
}

func (f *feed) setState(s string) {
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	if s == StateConnected {
		f.mConnected.Set(1)
	} else {
		f.mConnected.Set(0)
	}
}

// connectEarly connects the feed's sink to its consumer as the feed
// starts, and again until it reaches it (the sink's own backoff between
// tries) or the feed delivers: a consumer that cannot be reached shows in
// the state (disconnected) and last_error at once, not at the first copy,
// which may be minutes away on a quiet source.
func (f *feed) connectEarly(ctx context.Context, c Connecter) {
	for attempt := 0; ctx.Err() == nil && f.delivered.Load() == 0; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.Connect(cctx)
		cancel()
		if ctx.Err() != nil || f.delivered.Load() > 0 {
			return
		}
		if err == nil {
			f.mu.Lock()
			waiting := f.state == StateStarting || f.state == StateDisconnected
			f.mu.Unlock()
			if waiting {
				f.setState(StateConnected)
			}
			return
		}
		f.setErr(err)
		f.setState(StateDisconnected)
		if attempt == 0 {
			f.log.Warn("feed: cannot reach its consumer", "err", err)
		}
	}
}

// How a feed reads its sources (FeedStatus.Reader).
const (
	ReaderShared = "shared"
	ReaderOwn    = "own"
)

func (f *feed) setReader(r string) {
	f.mu.Lock()
	f.reader = r
	f.mu.Unlock()
}

func (f *feed) setErr(err error) {
	f.mu.Lock()
	f.lastErr, f.lastErrAt = err.Error(), time.Now()
	f.mu.Unlock()
}

func (f *feed) running() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancel != nil
}

func (f *feed) rotate() {
	f.mu.Lock()
	f.hist.Rotate()
	f.mu.Unlock()
}

func (f *feed) status() FeedStatus {
	f.mu.Lock()
	st := FeedStatus{
		Name: f.spec.Name, Type: f.spec.Type, State: f.state, Reader: f.reader,
		LastError: f.lastErr, LastErrorAt: f.lastErrAt, Since: f.since,
	}
	if now := time.Now(); now.Sub(f.latencyAt) >= latencyRefresh || f.latency.LatencyMax == 0 {
		// Merge resets and refills one histogram the windowed one owns:
		// it is read under the lock, as two status calls at once would
		// share it.
		f.latency, f.latencyAt = FeedLatency{}, now
		if h := f.hist.Merge(); h.TotalCount() > 0 {
			f.latency = FeedLatency{
				LatencyP50: float64(h.ValueAtQuantile(50)) / 1e6, LatencyP95: float64(h.ValueAtQuantile(95)) / 1e6,
				LatencyP99: float64(h.ValueAtQuantile(99)) / 1e6, LatencyMax: float64(h.Max()) / 1e6,
			}
		}
	}
	st.FeedLatency = f.latency
	f.mu.Unlock()
	st.Delivered, st.DeliveredBytes = f.delivered.Load(), f.bytes.Load()
	st.Failed, st.Retries = f.failed.Load(), f.retries.Load()
	st.Redelivered, st.Invalid, st.Undeliverable = f.redelivered.Load(), f.invalid.Load(), f.undelivered.Load()
	st.Incomplete, st.Reordered = f.incomplete.Load(), f.reordered.Load()
	st.LostToRetention, st.Lag = f.lost.Load(), f.lag.Load()
	f.filterStatus(&st)
	return st
}

// start runs the feed; its previous incarnation, if any, has stopped.
// The ledger forgets all but what was delivered: this incarnation starts
// from its group's commit.
func (f *feed) start(base context.Context) {
	f.led.reset()
	ctx, cancel := context.WithCancel(base)
	f.mu.Lock()
	f.cancel, f.done = cancel, make(chan struct{})
	f.mu.Unlock()
	go f.run(ctx)
}

// stop ends the loop and waits for it to commit and close.
func (f *feed) stop() {
	f.mu.Lock()
	cancel, done := f.cancel, f.done
	f.cancel = nil
	f.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	f.setState(StateStopped)
}

func (f *feed) backoff(attempt int) time.Duration {
	d := f.m.cfg.BackoffMin << min(attempt, 20)
	if d <= 0 || d > f.m.cfg.BackoffMax {
		d = f.m.cfg.BackoffMax
	}
	return d/2 + rand.N(d/2+1) // jitter, so feeds don't retry in lockstep
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (f *feed) run(ctx context.Context) {
	defer close(f.done)
	f.setState(StateStarting)
	switch {
	case f.spec.ExactlyOnce && f.spec.Type == TypeXDR:
		f.runTransactionalXDR(ctx)
		return
	case f.spec.ExactlyOnce:
		f.runTransactional(ctx)
		return
	}
	for attempt := 0; ; attempt++ {
		s, err := f.m.cfg.NewSink(&f.spec.FeedSpec)
		if err == nil && f.spec.Type == TypeXDR {
			if err = f.startXDRStage(ctx, s); err != nil {
				s.Close()
			}
		}
		if err == nil {
			f.sink = capsOf(s)
			if f.sink.connecter != nil {
				go f.connectEarly(ctx, f.sink.connecter)
			}
			break
		}
		f.setErr(err)
		f.setState(StateError)
		f.log.Error("feed: build sink", "err", err)
		if !sleepCtx(ctx, f.backoff(attempt)) {
			return
		}
	}
	defer f.sink.Close()
	if xs := f.xdrStage(); xs != nil {
		defer xs.Close() // before the sink it delivers to
	}

	// Decompressed batches come from a pool and go back once their copies
	// are delivered (pollBatch.release): otherwise they are most of the
	// director's allocations. Not for xdr feeds: unpooled since their commit
	// marks outlived the batch, which they no longer do (xdrStage.advance);
	// pooling them is not measured yet.
	pooled := f.xdrStage() == nil
	p := f.startPipeline(ctx)
	defer p.close()
	if f.spec.stage == stageRekey {
		go f.sendWatermarks(ctx)
	}

	// A copy feed reads through its sources' tap, shared with the other
	// copy feeds of the same sources (tap.go), unless sharing is off. When
	// the tap detaches it for falling behind, it reads this node's
	// partitions on its own until it has caught up and is attached again.
	if pooled && !f.m.cfg.SoloReads && !f.calls {
		mem := f.m.joinTap(f, p)
		for ctx.Err() == nil {
			f.setReader(ReaderShared)
			select {
			case <-mem.t.evictedCh(mem):
			case <-ctx.Done():
				continue
			}
			f.setReader(ReaderOwn)
			mem.catchUp(ctx)
		}
		// What was confirmed is committed while the tap still holds the
		// partitions, fenced as every tap commit is; then the feed leaves.
		mem.t.quiesce(mem)
		p.close() // the sender is done with every batch
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := mem.t.fencedCommit(cctx, []*tapMember{mem}); err != nil {
			f.log.Warn("feed: final commit", "err", err)
		}
		cancel()
		mem.t.leave(mem)
		return
	}
	f.setReader(ReaderOwn) // xdr feeds, call records, and sharing off
	f.runSolo(ctx, p, pooled)
}

// startPipeline starts the feed's sender: two stages, so that the next
// batch is polled and decoded (by the feed's own reader or by its tap) while
// the sender delivers the previous one (a TLS write waits for the
// consumer's TCP acknowledgement; the next fetch and decode need not).
// Batches reach the sender, and their offsets the commit, in poll order, and
// a batch's offsets are marked only once the sink confirmed it, so delivery
// stays at-least-once.
func (f *feed) startPipeline(ctx context.Context) *pipeline {
	p := &pipeline{
		free: make(chan *pollBatch, pipelineDepth),
		work: make(chan *pollBatch, pipelineDepth-1),
		sent: make(chan struct{}),
	}
	for range pipelineDepth {
		p.free <- &pollBatch{}
	}
	go func() {
		defer close(p.sent)
		if ps := f.sink.pipelined; ps != nil && f.xdrStage() == nil {
			f.deliverPipelined(ctx, ps, p.work, p.free)
		} else {
			for b := range p.work {
				if !f.deliver(ctx, b) {
					break
				}
				p.free <- b
			}
		}
		// ctx ended: nothing after the batch in hand may be marked either.
		for range p.work {
		}
	}()
	return p
}

// pipeline is a feed's batches between its reader and its sender: a reader
// takes a batch from free, fills it and queues it on work; the sender
// delivers it and, once the sink confirmed it, marks its offsets and
// returns it to free.
type pipeline struct {
	free chan *pollBatch
	work chan *pollBatch
	sent chan struct{} // closed when the sender stopped (ctx ended)
	once sync.Once
}

// close stops the sender once it has finished what was queued (or ctx
// ended) and waits for it.
func (p *pipeline) close() {
	p.once.Do(func() { close(p.work) })
	<-p.sent
}

// caughtUp reports whether a feed reading on its own is delivering and
// close enough to the end of its sources to share its tap's pace again.
func (f *feed) caughtUp() bool {
	return f.currentState() == StateConnected && f.lag.Load() <= int64(f.m.cfg.RejoinLag)
}

// currentState is the feed's state (FeedStatus.State).
func (f *feed) currentState() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}
