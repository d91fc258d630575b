package director

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/nfcopy"
)

// feed is one running feed: a consumer group, a sink, and the loop between.
type feed struct {
	m     *Manager
	spec  FeedSpec
	key   string
	group string
	log   *slog.Logger
	dirs  [8]bool // by nfcopy.Direction; all true when the spec names none

	delivered, bytes, failed, retries, lost, redelivered, invalid atomic.Uint64
	lag                                                           atomic.Int64

	mDelivered, mBytes, mFailed, mRetries, mLost, mRedelivered prometheus.Counter
	mLag, mConnected                                           prometheus.Gauge
	mLatency                                                   prometheus.Observer

	mu        sync.Mutex
	state     string
	reader    string // ReaderShared or ReaderOwn, once reading
	lastErr   string
	lastErrAt time.Time
	since     time.Time
	hist      *hdrhistogram.WindowedHistogram // µs

	cancel context.CancelFunc
	done   chan struct{}

	// consumer-side state, owned by the loop except expect (also touched
	// by the group callbacks).
	cl     *kgo.Client
	sink   Sink
	expMu  sync.Mutex
	expect map[tp]int64 // next offset we expect per partition, for loss detection

	// filters and xdr (filtering.go, xdrfeed.go)
	filt                          *feedFilter
	xsp                           atomic.Pointer[xdrSink] // set by the feed's goroutine, read by status
	matched, filteredOut, records atomic.Uint64
}

func (m *Manager) newFeed(s FeedSpec) *feed {
	f := &feed{
		m: m, spec: s, key: specKey(&s), group: m.cfg.GroupPrefix + s.Name,
		log:    m.log.With("feed", s.Name),
		state:  StateStarting,
		since:  time.Now(),
		hist:   hdrhistogram.NewWindowed(6, 1, 600_000_000, 3),
		expect: map[tp]int64{},
	}
	if len(s.Directions) == 0 {
		for i := range f.dirs {
			f.dirs[i] = true
		}
	}
	for _, d := range s.Directions {
		f.dirs[nfcopy.ParseDirection(d)] = true
	}
	l := prometheus.Labels{"feed": s.Name}
	mt := m.m
	f.mDelivered, f.mBytes = mt.delivered.With(l), mt.deliveredBytes.With(l)
	f.mFailed, f.mRetries = mt.failures.With(l), mt.retries.With(l)
	f.mLost, f.mRedelivered = mt.lost.With(l), mt.duplicates.With(l)
	f.mLag, f.mConnected, f.mLatency = mt.lag.With(l), mt.connected.With(l), mt.latency.With(l)
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
	// Merge resets and refills one histogram the windowed one owns: it is
	// read under the lock, as two status calls at once would share it.
	if h := f.hist.Merge(); h.TotalCount() > 0 {
		st.LatencyP50 = float64(h.ValueAtQuantile(50)) / 1e6
		st.LatencyP95 = float64(h.ValueAtQuantile(95)) / 1e6
		st.LatencyP99 = float64(h.ValueAtQuantile(99)) / 1e6
		st.LatencyMax = float64(h.Max()) / 1e6
	}
	f.mu.Unlock()
	st.Delivered, st.DeliveredBytes = f.delivered.Load(), f.bytes.Load()
	st.Failed, st.Retries = f.failed.Load(), f.retries.Load()
	st.Redelivered, st.Invalid = f.redelivered.Load(), f.invalid.Load()
	st.LostToRetention, st.Lag = f.lost.Load(), f.lag.Load()
	f.filterStatus(&st)
	return st
}

func (f *feed) start(base context.Context) {
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
	for attempt := 0; ; attempt++ {
		s, err := f.m.cfg.NewSink(&f.spec)
		if err == nil {
			s, err = f.wrapSink(ctx, s)
		}
		if err == nil {
			f.sink = s
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

	// Decompressed batches come from a pool and go back once their copies
	// are delivered (pollBatch.release): otherwise they are most of the
	// director's allocations. Not for xdr feeds, whose commit marks outlive the
	// batch (xdrSink.holdMarks).
	pooled := f.xdrSink() == nil
	p := f.startPipeline(ctx, pooled)
	defer p.close()

	// A copy feed reads through its sources' tap, shared with the other
	// copy feeds of the same sources (tap.go), unless sharing is off. When
	// the tap detaches it for falling behind, it reads this node's
	// partitions on its own until it has caught up and is attached again.
	if pooled && !f.m.cfg.SoloReads {
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
		mem.t.leave(mem)
		p.close() // the sender is done with every batch
		mem.finalCommit()
		return
	}
	f.setReader(ReaderOwn) // xdr feeds and sharing off
	f.runSolo(ctx, p, pooled)
}

// startPipeline starts the feed's sender: two stages, so that the next
// batch is polled and decoded (by the feed's own reader or by its tap) while
// the sender delivers the previous one (a TLS write waits for the
// consumer's TCP acknowledgement; the next fetch and decode need not).
// Batches reach the sender, and their offsets the commit, in poll order, and
// a batch's offsets are marked only once the sink confirmed it, so delivery
// stays at-least-once.
func (f *feed) startPipeline(ctx context.Context, pooled bool) *pipeline {
	p := &pipeline{
		free: make(chan *pollBatch, pipelineDepth),
		work: make(chan *pollBatch, pipelineDepth-1),
		sent: make(chan struct{}),
	}
	for range pipelineDepth {
		p.free <- &pollBatch{recycle: pooled}
	}
	go func() {
		defer close(p.sent)
		if ps, ok := f.sink.(PipelinedSink); ok {
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

// runSolo reads the feed's sources with its own consumer group until ctx
// ends, or until the client cannot be built: the feed then stays in the
// error state.
func (f *feed) runSolo(ctx context.Context, p *pipeline, pooled bool) {
	cl, err := f.m.cfg.Client.NewClient(readerOpts(pooled,
		kgo.ConsumerGroup(f.group),
		kgo.ConsumeTopics(f.spec.Sources...),
		// Deleted-by-retention offsets restart at the log start; the
		// gap is counted as lost, never silently skipped to the end.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
		kgo.OnPartitionsAssigned(f.assigned),
		kgo.OnPartitionsRevoked(f.revoked),
		kgo.OnPartitionsLost(f.revoked),
	)...)
	if err != nil {
		f.setErr(err)
		f.setState(StateError)
		f.log.Error("feed: kafka client", "err", err)
		return
	}
	f.cl = cl
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			f.log.Warn("feed: final commit", "err", err)
		}
		cancel()
		cl.Close()
	}()

	var lastFetchErr time.Time
	for ctx.Err() == nil {
		// A free slot first, then the poll: while the sender is busy,
		// copies gather in the client into one larger batch.
		var b *pollBatch
		select {
		case b = <-p.free:
		case <-p.sent: // the sender stopped: ctx ended
			continue
		case <-ctx.Done():
			continue
		}
		fs := cl.PollRecords(ctx, f.m.cfg.MaxBatch)
		if ctx.Err() != nil {
			p.free <- b
			break
		}
		f.fetchErrors(fs, &lastFetchErr)
		b.cl = cl
		if !f.decode(ctx, fs, b) {
			p.free <- b
			continue
		}
		p.work <- b // never blocks: at most pipelineDepth batches exist
	}
	// ctx ended: the sender stops with the batch in hand; nothing after it
	// is marked, and the marks so far are committed as the client closes.
	p.close()
}

// readerOpts are the fetch options of every reader of copies (a tap, a
// feed's own reader, a detached member's catch-up) followed by opts; pooled
// takes decompressed batches and records from pools (pollBatch.release).
// A reader that is behind always has a full fetch buffered besides the
// batches in its pipeline. NF copies compress well (snappy, 3 KB records),
// so franz-go's 50 MB default would hold several times that decompressed
// per lagging feed; 4 MB compressed is still more than a batch, and a
// lagging feed catches up in few fetches.
func readerOpts(pooled bool, opts ...kgo.Opt) []kgo.Opt {
	base := []kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond), kgo.FetchMaxBytes(4 << 20)}
	if pooled {
		base = append(base, kgo.WithPools(newDecompressPool(), newRecordPool()))
	}
	return append(base, opts...)
}

// fetchErrors notes a poll's fetch errors on the feed, logging one line
// per burst (last is when the last was logged), not one per poll; a
// cancelled or timed-out poll is no error.
func (f *feed) fetchErrors(fs kgo.Fetches, last *time.Time) {
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		f.setErr(err)
		if time.Since(*last) > 10*time.Second {
			*last = time.Now()
			f.log.Warn("feed: fetch", "topic", t, "partition", p, "err", err)
		}
	})
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

// pipelineDepth is how many polled batches a feed holds at once: one being
// decoded and the others written or waiting to be (with a PipelinedSink, one
// of them may be written and awaiting confirmation).
const pipelineDepth = 3

// pollBatch is one poll's copies on their way to the sink. Its copies point
// into the poll's record values, which the client does not reuse.
type pollBatch struct {
	arena       []*nfcopy.Copy // decoded copies, reused across polls
	used        int            // arena entries decoded by this poll
	batch       []*nfcopy.Copy // those that passed direction and filter
	marks       []*kgo.Record
	dlq         []*kgo.Record
	redelivered uint64
	recycle     bool          // the client pools decompressed batches: recycle recs on release
	recs        []*kgo.Record // every record of the poll, when recycle

	cl     *kgo.Client  // the feed's own reader that polled it, which commits its marks; or
	mem    *tapMember   // the tap membership that handed it, which commits them, and
	shared *sharedBatch // the tap's batch its copies point into
}

// decode fills b from one poll; false when the poll held no records.
func (f *feed) decode(ctx context.Context, fs kgo.Fetches, b *pollBatch) bool {
	b.batch, b.marks, b.dlq, b.redelivered = b.batch[:0], b.marks[:0], b.dlq[:0], 0
	n := 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		f.checkGap(ctx, p.Topic, p.Partition, p.Records[0].Offset, p.Records[len(p.Records)-1].Offset+1)
		h, seen := f.highDelivered(tp{p.Topic, p.Partition})
		if b.recycle {
			b.recs = append(b.recs, p.Records...)
		}
		for _, r := range p.Records {
			if n == len(b.arena) {
				b.arena = append(b.arena, new(nfcopy.Copy))
			}
			c := b.arena[n]
			b.used = max(b.used, n+1)
			if f.admit(b, r, c, nfcopy.Decode(r.Value, c), seen && r.Offset <= h) {
				n++ // c is in the batch: the next record takes a fresh copy
			}
		}
		b.marks = append(b.marks, p.Records[len(p.Records)-1])
	})
	return len(b.marks) > 0
}

// admit adds the copy c decoded from r to b if it decoded (decodeErr nil)
// and the feed takes it (its directions and filter); an undecodable record
// goes to b's dead letters. redelivered: r was delivered before.
func (f *feed) admit(b *pollBatch, r *kgo.Record, c *nfcopy.Copy, decodeErr error, redelivered bool) bool {
	if redelivered {
		b.redelivered++
	}
	if decodeErr != nil {
		b.dlq = f.deadLetter(b.dlq, r, decodeErr)
		return false
	}
	if !f.dirs[c.Direction] || !f.pass(c) {
		return false
	}
	b.batch = append(b.batch, c)
	return true
}

// release drops b's references into the records it was decoded from, once
// they are delivered: a decoded string pins the whole decompressed producer
// batch it points into (~150 KB), and four lagging feeds' idle arenas held
// ~1 GB that way. The copies keep their reusable buffers.
func (b *pollBatch) release() {
	if b.shared != nil {
		clear(b.batch)
		clear(b.marks)
		clear(b.dlq)
		b.shared.unref()
		b.shared, b.mem = nil, nil
		return
	}
	b.mem = nil // a detached member's own read (tapMember.catchUp)
	clear(b.marks)
	clear(b.dlq)
	releaseDecoded(b.arena[:b.used], func(yield func([]*kgo.Record)) { yield(b.recs) })
	b.used = 0
	clear(b.recs)
	b.recs = b.recs[:0]
}

// releaseDecoded unpins copies, then recycles the records they were decoded
// from (each set eachRecords yields) into franz-go's pools: in that order,
// so that no copy points into a recycled record. The caller has dropped
// every other reference into the records.
func releaseDecoded(copies []*nfcopy.Copy, eachRecords func(yield func([]*kgo.Record))) {
	for _, c := range copies {
		unpin(c)
	}
	eachRecords(func(recs []*kgo.Record) {
		for _, r := range recs {
			r.Recycle()
		}
	})
}

// unpin clears the fields of c that alias the record it was decoded from
// (nfcopy.Decode: strings and header values alias the raw record; Body is
// copied), keeping the capacity of Headers, their Values and Body.
func unpin(c *nfcopy.Copy) {
	for i, h := range c.Headers[:cap(c.Headers)] {
		clear(h.Values[:cap(h.Values)])
		c.Headers[:cap(c.Headers)][i].Name = ""
	}
	c.Version, c.CorrelationID, c.ProducerID, c.ProducerFQDN = "", "", "", ""
	c.ConsumerID, c.ConsumerFQDN, c.HopByHopID, c.NFType = "", "", "", ""
	c.NFFQDN, c.NFInstanceID, c.PodInstanceID, c.SourceIP, c.DestIP = "", "", "", "", ""
	c.Raw, c.Encoded = nil, nil
}

// highDelivered is the highest offset of the partition this feed delivered
// in this process, if any.
func (f *feed) highDelivered(k tp) (int64, bool) {
	f.m.dmu.Lock()
	defer f.m.dmu.Unlock()
	h, ok := f.m.delivered[f.spec.Name][k]
	return h, ok
}

// deliver sends one poll's copies and then marks its records for commit;
// false when ctx ended before the sink confirmed (nothing is marked then).
func (f *feed) deliver(ctx context.Context, b *pollBatch) bool {
	if len(b.batch) > 0 && !f.send(ctx, b.batch) {
		return false
	}
	f.confirmed(ctx, b)
	return true
}

// deliverPipelined is the sender of a feed whose sink confirms apart from
// writing: it writes each batch as soon as it is decoded and checks, in
// between, which written batches the sink has confirmed, marking those in
// order. When a write or a confirmation fails, every written but unconfirmed
// batch is written again, in order, after the usual backoff. It returns when
// ctx ends.
func (f *feed) deliverPipelined(ctx context.Context, ps PipelinedSink, work <-chan *pollBatch, free chan<- *pollBatch) {
	type written struct {
		b      *pollBatch
		ticket uint64
	}
	var pend []written // oldest first
	write := func(b *pollBatch) error {
		if len(b.batch) == 0 { // nothing to write: confirmed with what precedes it
			t := uint64(0)
			if len(pend) > 0 {
				t = pend[len(pend)-1].ticket
			}
			pend = append(pend, written{b, t})
			return nil
		}
		t, err := ps.Write(ctx, b.batch)
		if err != nil {
			return err
		}
		pend = append(pend, written{b, t})
		return nil
	}
	// rewrite writes every pending batch again until all are written.
	rewrite := func(err error) bool {
		todo := make([]*pollBatch, len(pend))
		for i := range pend {
			todo[i] = pend[i].b
		}
		n := 0
		for _, b := range todo {
			n += len(b.batch)
		}
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil || !f.retryAfter(ctx, err, attempt, "feed: send failed, retrying", "batch", n) {
				return false
			}
			pend = pend[:0]
			err = nil
			for _, b := range todo {
				if err = write(b); err != nil {
					break
				}
			}
			if err == nil {
				return true
			}
		}
	}
	const minWait, maxWait = 10 * time.Microsecond, 200 * time.Microsecond
	wait := minWait
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Confirm what the sink has confirmed, oldest first.
		for len(pend) > 0 {
			w := pend[0]
			ok := true
			var err error
			if len(w.b.batch) > 0 || w.ticket > 0 {
				ok, err = ps.Confirmed(w.ticket)
			}
			if err != nil {
				if !rewrite(err) {
					return
				}
				continue
			}
			if !ok {
				break
			}
			if len(w.b.batch) > 0 {
				f.countDelivered(w.b.batch)
			}
			f.confirmed(ctx, w.b)
			pend = append(pend[:0], pend[1:]...)
			free <- w.b
			wait = minWait
		}
		var b *pollBatch
		var ok bool
		if len(pend) == 0 {
			select {
			case b, ok = <-work:
			case <-ctx.Done():
				return
			}
		} else {
			timer.Reset(wait)
			select {
			case b, ok = <-work:
			case <-timer.C:
				wait = min(wait*2, maxWait)
				continue
			case <-ctx.Done():
				return
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		if !ok {
			return
		}
		if err := write(b); err != nil {
			pend = append(pend, written{b, 0})
			if !rewrite(err) {
				return
			}
		}
	}
}

// confirmed finishes a batch the sink confirmed: dead letters, redelivery
// count, the delivered high-water mark, and the marks for commit.
func (f *feed) confirmed(ctx context.Context, b *pollBatch) {
	if len(b.dlq) > 0 {
		f.flushDLQ(ctx, b.dlq)
	}
	f.m.dmu.Lock()
	high := f.m.delivered[f.spec.Name]
	if high == nil {
		high = map[tp]int64{}
		f.m.delivered[f.spec.Name] = high
	}
	for _, r := range b.marks {
		k := tp{r.Topic, r.Partition}
		if h, ok := high[k]; !ok || r.Offset > h {
			high[k] = r.Offset
		}
	}
	f.m.dmu.Unlock()
	if b.redelivered > 0 {
		f.redelivered.Add(b.redelivered)
		f.mRedelivered.Add(float64(b.redelivered))
	}
	f.markCommit(b)
	b.release()
}

func (f *feed) send(ctx context.Context, batch []*nfcopy.Copy) bool {
	for attempt := 0; ; attempt++ {
		err := f.sink.Send(ctx, batch)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !f.retryAfter(ctx, err, attempt, "feed: send failed, retrying", "batch", len(batch)) {
			return false
		}
	}
	f.countDelivered(batch)
	return true
}

// retryAfter records a failed delivery (attempt 0 is the first failure,
// logged as msg with logAttrs), waits the backoff and counts the retry. It
// is false if ctx ended while waiting.
func (f *feed) retryAfter(ctx context.Context, err error, attempt int, msg string, logAttrs ...any) bool {
	// Error and state first: a status that shows the failure counted shows
	// them too (a reader polling Failed then reading State saw connected).
	f.setErr(err)
	f.setState(StateDisconnected)
	f.failed.Add(1)
	f.mFailed.Inc()
	if attempt == 0 {
		f.log.Warn(msg, append([]any{"err", err}, logAttrs...)...)
	}
	if !sleepCtx(ctx, f.backoff(attempt)) {
		return false
	}
	f.retries.Add(1)
	f.mRetries.Inc()
	return true
}

// countDelivered counts a confirmed batch: copies, bytes, latency.
func (f *feed) countDelivered(batch []*nfcopy.Copy) {
	now := time.Now().UnixNano()
	var bytes uint64
	f.mu.Lock()
	for _, c := range batch {
		bytes += uint64(len(c.Raw))
		if c.Timestamp > 0 && now >= c.Timestamp {
			us := (now - c.Timestamp) / 1e3
			_ = f.hist.Current.RecordValue(us)
			f.mLatency.Observe(float64(now-c.Timestamp) / 1e9)
		}
	}
	wasConnected := f.state == StateConnected
	f.mu.Unlock()
	if !wasConnected {
		f.setState(StateConnected)
	}
	f.delivered.Add(uint64(len(batch)))
	f.mDelivered.Add(float64(len(batch)))
	f.bytes.Add(bytes)
	f.mBytes.Add(float64(bytes))
}

// deadLetter queues an undecodable record for the DLQ; it is then skipped.
func (f *feed) deadLetter(dlq []*kgo.Record, r *kgo.Record, err error) []*kgo.Record {
	reason := "invalid"
	var de *nfcopy.DecodeError
	if errors.As(err, &de) {
		reason = de.Reason
	}
	f.invalid.Add(1)
	f.m.m.invalid.WithLabelValues(r.Topic, reason).Inc()
	return append(dlq, &kgo.Record{
		Topic: f.m.cfg.DLQTopic,
		Key:   r.Key,
		Value: r.Value,
		Headers: []kgo.RecordHeader{
			{Key: "signalbox-error", Value: []byte(err.Error())},
			{Key: "signalbox-reason", Value: []byte(reason)},
			{Key: "signalbox-source-topic", Value: []byte(r.Topic)},
			{Key: "signalbox-source-partition", Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
			{Key: "signalbox-source-offset", Value: strconv.AppendInt(nil, r.Offset, 10)},
			{Key: "signalbox-feed", Value: []byte(f.spec.Name)},
		},
	})
}

func (f *feed) flushDLQ(ctx context.Context, dlq []*kgo.Record) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.m.admin.ProduceSync(ctx, dlq...).FirstErr(); err != nil {
		// The record is still skipped: a broken DLQ must not stop the feed.
		f.log.Error("feed: dead-letter produce failed; invalid copies skipped", "count", len(dlq), "err", err)
	}
}

// assigned notes, per new partition, where consumption resumes; a commit
// below the log start means copies were deleted by retention unread.
func (f *feed) assigned(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	committed, err := f.m.adm.FetchOffsets(ctx, f.group)
	if err != nil {
		f.log.Warn("feed: fetch committed offsets", "err", err)
		return
	}
	starts, err := f.m.adm.ListStartOffsets(ctx, slices.Collect(maps.Keys(parts))...)
	if err != nil {
		f.log.Warn("feed: list start offsets", "err", err)
		return
	}
	f.expMu.Lock()
	defer f.expMu.Unlock()
	for t, ps := range parts {
		for _, p := range ps {
			c, ok := committed.Lookup(t, p)
			if !ok || c.Err != nil || c.At < 0 {
				continue
			}
			next := c.At
			if s, ok := starts.Lookup(t, p); ok && s.Err == nil && s.Offset > c.At {
				f.countLost(t, p, s.Offset-c.At)
				next = s.Offset
			}
			f.expect[tp{t, p}] = next
		}
	}
}

func (f *feed) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		f.log.Warn("feed: commit on revoke", "err", err)
	}
	f.expMu.Lock()
	for t, ps := range parts {
		for _, p := range ps {
			delete(f.expect, tp{t, p})
		}
	}
	f.expMu.Unlock()
}

// checkGap counts copies skipped between what we expected next and what the
// fetch returned, if retention deleted them (a gap can also be transaction
// markers, which are not losses).
func (f *feed) checkGap(ctx context.Context, t string, p int32, first, next int64) {
	key := tp{t, p}
	f.expMu.Lock()
	exp, ok := f.expect[key]
	f.expect[key] = next
	f.expMu.Unlock()
	if !ok || first <= exp {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	starts, err := f.m.adm.ListStartOffsets(lctx, t)
	if err != nil {
		return
	}
	if s, ok := starts.Lookup(t, p); ok && s.Err == nil && s.Offset > exp {
		f.countLost(t, p, min(s.Offset, first)-exp)
	}
}

func (f *feed) countLost(t string, p int32, n int64) {
	f.lost.Add(uint64(n))
	f.mLost.Add(float64(n))
	f.setErr(errors.New("copies deleted by retention before delivery"))
	f.log.Error("feed: copies deleted by retention before delivery", "topic", t, "partition", p, "lost", n)
}
