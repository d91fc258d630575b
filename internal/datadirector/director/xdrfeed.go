package director

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// An xdr feed runs the ordinary feed loop (poll → decode → "send" → mark)
// with a correlator standing in for the sink: its Send adds the copies to the
// correlator and delivers the records they complete to the real output (a
// kafka topic, an HTTP/2 URL or files); a timer expires waiting transactions
// and delivers those records too.
//
// Offsets. A copy's offset may be committed only once its transaction's
// record was delivered: the feed commits, per partition, the lowest offset
// of the copies of the transactions still open in the correlator (all it
// read when none is open). After a restart, or when a partition moves to
// another node, what is read again is only the copies of the transactions
// that were open; the node giving a partition up drops those transactions
// without records (dropParts), so the new owner, reading their copies
// again, completes them and nothing is emitted twice but what was emitted
// since the last commit (a second, the auto-commit interval).
//
// All copies of a transaction must reach the same correlator. On one node
// one feed reads every partition of its sources, so this holds. Several
// nodes sharing an xdr feed would split transactions (each NF type has its
// own topic, so partitions do not line up across topics); with rekey the
// feed first re-keys its copies by correlation id into an internal topic,
// and the correlating stage reads that, so a transaction's copies meet on
// one partition whichever node holds it. The correlating stage's clock
// follows the re-key stage's watermarks (watermark.go), and stands still
// while the re-key stage's partitions move or stall (xdr_upstream.go).

// xdrConfig turns a spec's xdr options into the correlator's config.
func xdrConfig(spec *FeedSpec) (xdr.Config, error) {
	var c xdr.Config
	xs := spec.XDR
	if xs == nil {
		return c, nil
	}
	var err error
	if xs.Timeout != "" {
		if c.Timeout, err = time.ParseDuration(xs.Timeout); err != nil || c.Timeout <= 0 {
			return c, &FieldError{Field: "xdr.timeout", Msg: fmt.Sprintf("%q: want a positive duration such as 5s", xs.Timeout)}
		}
	}
	if xs.Linger != "" {
		if c.Linger, err = time.ParseDuration(xs.Linger); err != nil || c.Linger < 0 {
			return c, &FieldError{Field: "xdr.linger", Msg: fmt.Sprintf("%q: want a duration such as 300ms", xs.Linger)}
		}
	}
	if c.Linger > max(c.Timeout, 5*time.Second) || (c.Timeout > 0 && c.Linger > c.Timeout) {
		return c, &FieldError{Field: "xdr.linger", Msg: fmt.Sprintf("%s: must not exceed the timeout", c.Linger)}
	}
	if xs.MaxPending < 0 {
		return c, &FieldError{Field: "xdr.max_pending", Msg: "must not be negative"}
	}
	c.MaxPending = xs.MaxPending
	return c, nil
}

// trackingRegisterer remembers what it registered, so a stopping feed can
// unregister its correlator's series and a restarted one register them
// again. Only the goroutine that makes the correlator (which registers its
// series in xdr.New) uses it, and it unregisters them when it stops.
type trackingRegisterer struct {
	reg prometheus.Registerer
	cs  []prometheus.Collector
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	if err := t.reg.Register(c); err != nil {
		return err
	}
	t.cs = append(t.cs, c)
	return nil
}

func (t *trackingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackingRegisterer) Unregister(c prometheus.Collector) bool { return t.reg.Unregister(c) }

func (t *trackingRegisterer) unregisterAll() {
	for _, c := range t.cs {
		t.reg.Unregister(c)
	}
	t.cs = nil
}

// readPos is where an xdr feed's reader is in a partition: after the last
// record of the batches it added, in the ledger epoch they were read in.
type readPos struct {
	next        int64
	leaderEpoch int32 // of the last record read: franz-go's marks never move to a lower one
	epoch       uint64
	marked      int64 // the last offset marked for commit
}

// xdrStage is an xdr feed's correlating stage, between its reader and its
// sink: a batch's copies in (sendFrom, from the feed's sender), transaction
// records out to the feed's sink (output), also when they time out
// (expireLoop). Its marks are committed at the low water of the
// transactions still open (advance, markLowWater). An exactly-once xdr feed
// uses it as its correlator only, with a Kafka transaction as its output
// (xdrtxn.go).
type xdrStage struct {
	f       *feed
	x       *xdr.Correlator
	reg     *trackingRegisterer
	output  sinkCaps // the feed's sink; its Sink nil for an exactly-once feed
	tick    time.Duration
	timeout time.Duration // the correlator's

	mu     sync.Mutex     // one delivery to output at a time
	srcIdx map[tp]uint32  // the correlator's source number of each partition (under mu)
	read   map[tp]readPos // under mu
	xdrScratch

	// clock is the correlator's: it stands still while the re-key stage
	// upstream is stalled (watchUpstream), and is held back to the re-key
	// stage's watermarks (wm, a correlating stage's only; now).
	clock pausingClock
	wm    *watermarks

	recent recentRing // the last records delivered, as JSON, for the console

	stop    chan struct{}
	done    chan struct{}
	upDone  chan struct{} // watchUpstream's, when it runs
	unwatch func()        // ends watchRebalances, when it runs
}

// xdrScratch is what an xdr sink's deliveries reuse, under its mu.
type xdrScratch struct {
	recs     []xdr.Record
	out      []*nfcopy.Copy
	outBuf   []nfcopy.Copy
	keep     []xdr.Record // deliver: the records this feed stores
	keepRaws [][]byte     // and their JSON
	owned    map[tp]bool  // sendFrom
	low      map[uint32]int64
	spans    map[uint32][][2]int64 // markLowWater
}

// startXDRStage starts an xdr feed's correlating stage in front of its
// sink, output.
func (f *feed) startXDRStage(ctx context.Context, output Sink) error {
	xs, err := f.newXDRStage(output, false)
	if err != nil {
		return err
	}
	if f.spec.stage == stageCorrelate {
		xs.wm = newWatermarks(2*f.m.cfg.SessionTimeout+xs.timeout, f.m.m.replayed.WithLabelValues(f.spec.Name))
		xs.upDone = make(chan struct{})
		xs.unwatch = f.m.watchRebalances(rekeyStage1Name(f.spec.Name), &xs.clock)
		go xs.watchUpstream(ctx, f.m.cfg.GroupPrefix+rekeyStage1Name(f.spec.Name), xs.timeout)
	}
	f.xsp.Store(xs)
	go xs.expireLoop(ctx)
	return nil
}

// newXDRStage makes the feed's correlator stage in front of output, with its
// metrics registered; track keeps every copy's offset (xdr.Config's
// TrackOffsets), for an exactly-once feed's checkpoints.
func (f *feed) newXDRStage(output Sink, track bool) (*xdrStage, error) {
	cfg, err := xdrConfig(&f.spec.FeedSpec)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.TrackOffsets = track
	cfg.MaskGPSI = f.m.cfg.MaskNumbers
	xs := &xdrStage{f: f, output: capsOf(output), timeout: cfg.Timeout,
		tick:   min(max(cfg.Timeout/10, 10*time.Millisecond), 500*time.Millisecond),
		srcIdx: map[tp]uint32{}, read: map[tp]readPos{},
		xdrScratch: xdrScratch{owned: map[tp]bool{}, low: map[uint32]int64{}, spans: map[uint32][][2]int64{}},
		stop:       make(chan struct{}), done: make(chan struct{})}
	cfg.Now = xs.now
	if r := f.m.cfg.Registerer; r != nil {
		xs.reg = &trackingRegisterer{reg: prometheus.WrapRegistererWith(prometheus.Labels{"feed": f.spec.Name}, r)}
		cfg.Registerer = xs.reg
	}
	if xs.x, err = xdr.New(cfg); err != nil {
		if xs.reg != nil {
			xs.reg.unregisterAll()
		}
		return nil, fmt.Errorf("feed %q: %w", f.spec.Name, err)
	}
	return xs, nil
}

// sendFrom adds a polled batch's copies to the correlator and delivers the
// records they complete; it fails only when ctx ends (the copies are then
// read again). Each copy is added with its partition, so that the
// transactions of a partition given up can be dropped (dropParts), and
// copies of a partition given up since the poll (its epoch over) are left
// to its new owner.
func (s *xdrStage) sendFrom(ctx context.Context, b *pollBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.owned)
	for i, r := range b.marks {
		k := tp{r.Topic, r.Partition}
		s.owned[k] = s.f.led.owns(k, b.epochs[i])
	}
	s.recs = s.recs[:0]
	for i, c := range b.batch {
		from := b.srcs[i]
		if !s.owned[from.k] {
			continue
		}
		src, ok := s.srcIdx[from.k]
		if !ok {
			src = uint32(len(s.srcIdx))
			s.srcIdx[from.k] = src
		}
		s.recs = s.x.AddFrom(c, src, from.off, s.recs)
	}
	return s.deliver(ctx)
}

// deliver sends s.recs that pass the filter to the output, retrying until it
// confirms or ctx ends. s.mu is held.
func (s *xdrStage) deliver(ctx context.Context) error {
	s.encode()
	s.store()
	if len(s.out) == 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := s.output.Send(ctx, s.out)
		if err == nil {
			break
		}
		if ctx.Err() != nil ||
			!s.f.retryAfter(ctx, err, attempt, "xdr feed: record delivery failed, retrying", "records", len(s.out)) {
			return ctx.Err()
		}
	}
	s.f.setState(StateConnected)
	s.deadLetterRejected(ctx)
	s.delivered(s.out)
	return nil
}

// deadLetterRejected sends the records the output set aside in the
// delivery just made as never deliverable (too large for the topic, 413
// from an HTTP/2 consumer: RejectingSink) to the dead-letter topic, now,
// while s.out still holds them; they count as undeliverable. s.mu is held.
func (s *xdrStage) deadLetterRejected(ctx context.Context) {
	rs := s.output.rejecting
	if rs == nil {
		return
	}
	cs, reasons := rs.Rejected()
	if len(cs) == 0 {
		return
	}
	dlq := make([]*kgo.Record, 0, len(cs))
	for i, c := range cs {
		dlq = s.f.undeliverable(dlq, c, reasons[i])
	}
	s.f.flushDLQ(ctx, dlq)
}

// encode turns s.recs into s.out, the output's copies of the records the
// feed's filter passes, and s.keep and s.keepRaws, the records and JSON the
// record store keeps. s.mu is held.
func (s *xdrStage) encode() {
	f := s.f
	// With a record store, every record the correlator made is kept,
	// whatever the feed's filter, by one of the xdr feeds that make it
	// (Manager.recordStorers): each is encoded once, for both.
	st := f.m.cfg.RecordStore
	s.out = s.out[:0]
	if cap(s.outBuf) < len(s.recs) {
		s.outBuf = make([]nfcopy.Copy, len(s.recs))
	}
	s.outBuf = s.outBuf[:len(s.recs)]
	for i := range s.recs {
		r := &s.recs[i]
		pass := f.passRecord(r)
		store := st != nil && f.m.stores(f.spec.Name, r)
		if !pass && !store {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil { // a Record always marshals; keep going if not
			f.log.Error("xdr feed: encode record", "err", err)
			continue
		}
		if store {
			s.keep, s.keepRaws = append(s.keep, *r), append(s.keepRaws, b)
		}
		if !pass {
			continue
		}
		c := &s.outBuf[len(s.out)]
		*c = nfcopy.Copy{CorrelationID: r.CorrelationID, Timestamp: r.End, Raw: b}
		s.out = append(s.out, c)
	}
}

// store hands the records encode kept to the record store.
func (s *xdrStage) store() {
	if len(s.keep) == 0 {
		return
	}
	s.f.m.cfg.RecordStore.Append(s.keep, s.keepRaws) // copies what it keeps
	clear(s.keep)
	clear(s.keepRaws)
	s.keep, s.keepRaws = s.keep[:0], s.keepRaws[:0]
}

// delivered counts out, records the output confirmed, and keeps the last
// of them for the console.
func (s *xdrStage) delivered(out []*nfcopy.Copy) {
	s.remember(out)
	s.f.records.Add(uint64(len(out)))
	s.f.m.m.records.WithLabelValues(s.f.spec.Name).Add(float64(len(out)))
}

// expireLoop emits timed-out transactions and releases held marks whose
// copies' transactions have all been delivered.
func (s *xdrStage) expireLoop(ctx context.Context) {
	defer close(s.done)
	s.every(ctx, s.tick, func() bool {
		if s.wm != nil {
			s.wm.refresh()
		}
		now := s.now()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.recs = s.x.Expire(now, s.recs[:0])
		if err := s.deliver(ctx); err != nil {
			return false
		}
		s.markLowWater()
		return true
	})
}

// now is the correlator's clock: the pausing clock, held back to the
// lowest watermark of the re-key stage.
func (s *xdrStage) now() time.Time {
	if s.wm != nil {
		return s.wm.clamp(s.clock.now())
	}
	return s.clock.now()
}

// every calls fn every d until ctx ends, the sink is closed, or fn returns
// false.
func (s *xdrStage) every(ctx context.Context, d time.Duration, fn func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// read notes where the reader is after a processed batch (its records'
// copies are in the correlator, or were not for it).
func (s *xdrStage) advance(marks []*kgo.Record, epochs []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range marks {
		k := tp{r.Topic, r.Partition}
		rp, ok := s.read[k]
		if !ok || rp.epoch != epochs[i] {
			rp = readPos{epoch: epochs[i], marked: -1}
		}
		if r.Offset+1 > rp.next {
			rp.next, rp.leaderEpoch = r.Offset+1, r.LeaderEpoch
		}
		s.read[k] = rp
	}
}

// markLowWater marks for commit, per partition the feed holds, the lowest
// offset of a copy of an open transaction, else all it read, and never
// inside the copies of a transaction emitted lately (xdr.Correlator.Emitted);
// s.mu is held, and every record the correlator emitted so far was
// delivered.
func (s *xdrStage) markLowWater() {
	clear(s.low)
	s.x.LowWater(func(src uint32, off int64) {
		if l, ok := s.low[src]; !ok || off < l {
			s.low[src] = off
		}
	})
	for src, sp := range s.spans {
		s.spans[src] = sp[:0]
	}
	s.x.Emitted(func(src uint32, lo, hi int64) {
		if lo < hi {
			s.spans[src] = append(s.spans[src], [2]int64{lo, hi})
		}
	})
	var marks map[string]map[int32]kgo.EpochOffset
	for k, rp := range s.read {
		if !s.f.led.owns(k, rp.epoch) {
			delete(s.read, k)
			continue
		}
		at := rp.next
		if src, ok := s.srcIdx[k]; ok {
			if l, ok := s.low[src]; ok && l < at {
				at = l
			}
			at = outside(at, s.spans[src])
		}
		if at <= rp.marked {
			continue
		}
		rp.marked = at
		s.read[k] = rp
		if marks == nil {
			marks = map[string]map[int32]kgo.EpochOffset{}
		}
		if marks[k.topic] == nil {
			marks[k.topic] = map[int32]kgo.EpochOffset{}
		}
		marks[k.topic][k.partition] = kgo.EpochOffset{Epoch: rp.leaderEpoch, Offset: at}
	}
	if marks != nil {
		s.f.cl.MarkCommitOffsets(marks)
	}
}

// outside moves at down until it falls inside none of spans ([lo, hi] of
// one transaction's copies: committing at lo re-reads all of them, at hi+1
// none).
func outside(at int64, spans [][2]int64) int64 {
	for moved := true; moved; {
		moved = false
		for _, sp := range spans {
			if sp[0] < at && at <= sp[1] {
				at, moved = sp[0], true
			}
		}
	}
	return at
}

// dropParts forgets what the feed held of partitions it gave up: the
// transactions their copies are in, without a record (the new owner reads
// the copies again from the last commit, which is before them, and
// completes the transactions), and where it was in them.
func (s *xdrStage) dropParts(parts map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eachPart(parts, func(k tp) { delete(s.read, k) })
	if s.wm != nil {
		s.wm.forget(parts)
	}
	gone := map[uint32]bool{}
	for k, src := range s.srcIdx {
		if slices.Contains(parts[k.topic], k.partition) {
			gone[src] = true
		}
	}
	if len(gone) > 0 {
		if n := s.x.Drop(func(src uint32) bool { return gone[src] }); n > 0 {
			s.f.log.Info("xdr feed: partitions given up; their pending transactions left to the new owner", "transactions", n)
		}
	}
}

// Close stops the timer (pending transactions are not flushed: their copies
// are uncommitted and read again by the next run) and unregisters the
// correlator's series; the feed closes its sink after it.
func (s *xdrStage) Close() {
	close(s.stop)
	<-s.done
	if s.upDone != nil {
		<-s.upDone
		s.unwatch()
	}
	if s.reg != nil {
		s.reg.unregisterAll()
	}
}

// markCommit marks a processed poll's records for commit: at once for copy
// feeds, once their transactions were delivered for xdr feeds.
func (f *feed) markCommit(b *pollBatch) {
	switch xs := f.xdrStage(); {
	case xs != nil:
		xs.advance(b.marks, b.epochs) // committed at its low water (markLowWater)
	default:
		// confirmed in the ledger: the tap commits it, or the feed's own
		// reader (commitOwn)
	}
}

// recentRecords is how many delivered records an xdr feed keeps for
// GET /api/v1/feeds/{name}/records.
const recentRecords = 100

// recentRing keeps the last recentRecords records delivered, as JSON.
type recentRing struct {
	mu    sync.Mutex
	ring  [recentRecords]json.RawMessage
	next  int
	count int
}

// remember keeps copies of the last delivered records' JSON (the out slice's
// buffers are reused by the next delivery).
func (s *xdrStage) remember(out []*nfcopy.Copy) {
	if len(out) > recentRecords {
		out = out[len(out)-recentRecords:]
	}
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range out {
		r.ring[r.next] = append(json.RawMessage(nil), c.Raw...)
		r.next = (r.next + 1) % recentRecords
		r.count = min(r.count+1, recentRecords)
	}
}

// recentJSON returns up to n of the last delivered records, newest first.
func (s *xdrStage) recentJSON(n int) []json.RawMessage {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(n, r.count)
	out := make([]json.RawMessage, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.ring[(r.next-i+recentRecords)%recentRecords])
	}
	return out
}

// RecentRecords returns up to n of the transaction records an xdr feed
// delivered last, newest first; false if there is no such xdr feed.
func (m *Manager) RecentRecords(name string, n int) ([]json.RawMessage, bool) {
	f, ok := m.feedSet()[name]
	if !ok || f.spec.Type != TypeXDR {
		return nil, false
	}
	xs := f.xdrStage()
	if xs == nil {
		return []json.RawMessage{}, true // not started yet
	}
	return xs.recentJSON(n), true
}

// xdrStage is the feed's correlator stage (nil for copy feeds, or before start).
func (f *feed) xdrStage() *xdrStage { return f.xsp.Load() }
