package director

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/sink/synthetic"
)

// A tap is the one reader of a set of source topics that the copy feeds
// reading exactly that set share. It fetches and decodes each copy once and
// hands every member feed, into the feed's own pipeline, a batch of the
// copies that pass the feed's directions and filter. Four probes fed the
// same stream cost one fetch and one decode per copy, not four: fetching,
// decompressing and decoding are most of a copy feed's CPU.
//
// Each member keeps what makes it a feed of its own: its sink, its pace
// within its pipeline, and its offsets in its own consumer group, which the
// tap commits (the group has no member while its feed is on the tap). A
// member that takes no batch for Config.TapStall (its consumer is down or
// slow) is detached, so it holds the others back for at most that long: it
// then reads on its own (tapMember.catchUp), but only the partitions this
// node's tap holds, from where the tap left it, committing as the tap does,
// and is attached again once it has caught up. A detached member stays a
// member: the tap keeps its partitions for it (and stops polling when no
// member is attached), so other nodes' taps and their commits for the same
// feed are not disturbed while it catches up.
//
// The tap's own consumer group (GroupPrefix + "tap." + the sorted sources)
// only spreads partitions over signalbox nodes and commits nothing. Where a
// partition is assigned, reading starts at the lowest next offset of the
// members (what the tap handed them in this process, else their groups'
// commits), and each member skips what it already had. A feed joining
// restarts the tap's reader, so that it starts where the feed is.
type tap struct {
	m       *Manager
	key     string
	sources []string
	group   string
	log     *slog.Logger

	mu      sync.Mutex
	members []*tapMember
	joined  time.Time          // last join, to let a burst of joins settle
	restart context.CancelFunc // ends the running reader (a join, or the last leave)
	parts   map[tp]bool        // the partitions the running reader holds on this node
	partsCh chan struct{}      // closed (and replaced) when parts change

	pool chan *sharedBatch

	sharedEncodings atomic.Int64 // copies whose encoding several sinks shared
}

// tapSettle is how long a tap waits after a feed joins before it (re)starts
// its reader: feeds start one after another.
const tapSettle = 50 * time.Millisecond

// tapMember is one feed on a tap.
type tapMember struct {
	t        *tap
	f        *feed
	p        *pipeline
	detached bool          // under t.mu: dropped for stalling, catching up on its own
	evicted  chan struct{} // under t.mu: closed when the tap detaches the member (a new one on attach)
	gone     chan struct{} // closed when the member is off the tap (it left)
	handMu   sync.Mutex    // held while the tap hands the member a batch

	nextMu sync.Mutex
	next   map[tp]int64 // next offset to hand the member, per partition

	commitMu sync.Mutex // one commit at a time, so they land in order
	doneMu   sync.Mutex
	done     map[tp]int64 // next offset after the member's confirmed copies
	revoked  map[tp]bool  // partitions another node reads now: not committed
	dirty    bool
}

// sharedBatch is one poll of a tap, decoded once; the members' batches point
// into it, and the last to release it recycles it.
type sharedBatch struct {
	t     *tap
	arena []*nfcopy.Copy
	errs  []error // nfcopy.Decode's error per arena entry
	used  int
	parts []sharedPart
	refs  atomic.Int32

	// The copies' encoding shared by members' sinks of one key (share).
	enc    *synthetic.Shared
	encKey any
	good   []*nfcopy.Copy // scratch: the copies that decoded
}

type sharedPart struct {
	topic     string
	partition int32
	recs      []*kgo.Record
	first     int // arena index of recs[0]
}

func tapKey(sources []string) []string {
	s := slices.Clone(sources)
	slices.Sort(s)
	return slices.Compact(s)
}

// joinTap puts f on its sources' tap, starting the tap if it is the first.
func (m *Manager) joinTap(f *feed, p *pipeline) *tapMember {
	sources := tapKey(f.spec.Sources)
	key := strings.Join(sources, ",")
	m.tmu.Lock()
	defer m.tmu.Unlock()
	t := m.taps[key]
	if t == nil {
		t = &tap{
			m: m, key: key, sources: sources, group: m.cfg.GroupPrefix + "tap." + strings.Join(sources, "+"),
			log:   m.log.With("tap", key),
			pool:  make(chan *sharedBatch, 2*pipelineDepth),
			parts: map[tp]bool{}, partsCh: make(chan struct{}),
		}
		m.taps[key] = t
		go t.run()
	}
	mem := &tapMember{
		t: t, f: f, p: p, evicted: make(chan struct{}), gone: make(chan struct{}),
		next: map[tp]int64{}, done: map[tp]int64{}, revoked: map[tp]bool{},
	}
	t.mu.Lock()
	t.members = append(t.members, mem)
	t.restartReader()
	t.mu.Unlock()
	return mem
}

// restartReader has the running reader start over, after tapSettle, so
// that it starts each partition where the lowest attached member is (a
// join or an attach); t.mu is held.
func (t *tap) restartReader() {
	t.joined = time.Now()
	if t.restart != nil {
		t.restart()
	}
}

// attach puts a detached member back on the tap's pace; the reader
// restarts, as for a join.
func (t *tap) attach(mem *tapMember) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mem.detached = false
	mem.evicted = make(chan struct{})
	t.restartReader()
}

// evictedCh is the channel closed when mem is next detached.
func (t *tap) evictedCh(mem *tapMember) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return mem.evicted
}

// leave takes mem off the tap and returns once the tap no longer hands it
// anything.
func (t *tap) leave(mem *tapMember) {
	t.mu.Lock()
	t.remove(mem)
	if len(t.members) == 0 && t.restart != nil {
		t.restart()
	}
	t.mu.Unlock()
	mem.handMu.Lock() // a hand-off in progress ends first
	mem.handMu.Unlock()
}

// remove takes mem out of t.members and closes gone, once; t.mu is held.
func (t *tap) remove(mem *tapMember) bool {
	i := slices.Index(t.members, mem)
	if i < 0 {
		return false
	}
	t.members = slices.Delete(t.members, i, i+1)
	close(mem.gone)
	return true
}

// snapshot is every member, attached or detached: both commit and both
// forget revoked partitions.
func (t *tap) snapshot() []*tapMember {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.members)
}

// anyAttached reports whether the tap hands batches to any member.
func (t *tap) anyAttached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.members, func(mem *tapMember) bool { return !mem.detached })
}

// attached is the members the tap hands batches to.
func (t *tap) attached() []*tapMember {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*tapMember
	for _, mem := range t.members {
		if !mem.detached {
			out = append(out, mem)
		}
	}
	return out
}

// assignment is the partitions the tap holds now, and a channel closed when
// that changes.
func (t *tap) assignment() (map[tp]bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.parts), t.partsCh
}

// setParts adds (or, with add false, drops) partitions of the tap's and
// tells the detached members' readers.
func (t *tap) setParts(parts map[string][]int32, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			if add {
				t.parts[tp{topic, p}] = true
			} else {
				delete(t.parts, tp{topic, p})
			}
		}
	}
	t.partsChanged()
}

// clearParts drops every partition: the reader stopped.
func (t *tap) clearParts() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.parts) > 0 {
		clear(t.parts)
		t.partsChanged()
	}
}

// partsChanged wakes the readers waiting on partsCh; t.mu is held.
func (t *tap) partsChanged() {
	close(t.partsCh)
	t.partsCh = make(chan struct{})
}

// run reads for the members until none is left.
func (t *tap) run() {
	cctx, stopCommits := context.WithCancel(context.Background())
	commits := make(chan struct{})
	go t.commitLoop(cctx, commits)
	defer func() {
		stopCommits()
		<-commits
	}()
	for {
		t.m.tmu.Lock()
		t.mu.Lock()
		if len(t.members) == 0 || t.m.base.Err() != nil {
			t.mu.Unlock()
			if t.m.taps[t.key] == t {
				delete(t.m.taps, t.key)
			}
			t.m.tmu.Unlock()
			return
		}
		if d := tapSettle - time.Since(t.joined); d > 0 {
			t.mu.Unlock()
			t.m.tmu.Unlock()
			time.Sleep(d)
			continue
		}
		ctx, cancel := context.WithCancel(t.m.base)
		t.restart = cancel
		t.mu.Unlock()
		t.m.tmu.Unlock()

		t.consume(ctx)
		cancel()
		t.mu.Lock()
		t.restart = nil
		t.mu.Unlock()
	}
}

// consume reads and hands out batches until ctx ends.
func (t *tap) consume(ctx context.Context) {
	cl, err := t.m.cfg.Client.NewClient(readerOpts(true,
		kgo.ConsumerGroup(t.group),
		kgo.ConsumeTopics(t.sources...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.AdjustFetchOffsetsFn(t.adjust),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) { t.setParts(parts, true) }),
		kgo.OnPartitionsRevoked(t.revoked(ctx)),
		kgo.OnPartitionsLost(t.revoked(ctx)),
	)...)
	if err != nil {
		t.log.Error("feed tap: kafka client", "err", err)
		for _, mem := range t.snapshot() {
			mem.f.setErr(err)
			mem.f.setState(StateError)
		}
		sleepCtx(ctx, t.m.cfg.BackoffMax)
		return
	}
	defer func() {
		cl.Close()
		t.clearParts() // no longer held here
	}()
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	var lastFetchErr time.Time
	var turn uint // which attached member is handed the next poll first
	for ctx.Err() == nil {
		if !t.anyAttached() {
			// Every member is catching up on its own: hold the partitions
			// for them without reading; an attach restarts the reader.
			<-ctx.Done()
			return
		}
		fs := cl.PollRecords(ctx, t.m.cfg.MaxBatch)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			for _, mem := range t.snapshot() {
				mem.f.setErr(err)
			}
			if time.Since(lastFetchErr) > 10*time.Second { // one line per burst, not per poll
				lastFetchErr = time.Now()
				t.log.Warn("feed tap: fetch", "topic", topic, "partition", p, "err", err)
			}
		})
		if sb := t.decode(fs); sb != nil {
			t.hand(ctx, sb, stall, turn)
			turn++
			sb.unref() // the tap's own reference
		}
	}
}

// decode decodes one poll once; nil when it held no records.
func (t *tap) decode(fs kgo.Fetches) *sharedBatch {
	var sb *sharedBatch
	select {
	case sb = <-t.pool:
	default:
		sb = &sharedBatch{t: t}
	}
	n := 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		sb.parts = append(sb.parts, sharedPart{topic: p.Topic, partition: p.Partition, recs: p.Records, first: n})
		for _, r := range p.Records {
			if n == len(sb.arena) {
				sb.arena = append(sb.arena, new(nfcopy.Copy))
				sb.errs = append(sb.errs, nil)
			}
			sb.errs[n] = nfcopy.Decode(r.Value, sb.arena[n])
			n++
			sb.used = n
		}
	})
	if len(sb.parts) == 0 {
		select {
		case t.pool <- sb:
		default:
		}
		return nil
	}
	sb.refs.Store(1)
	return sb
}

// hand gives every member its share of sb, waiting for each to have a free
// batch; a member that has none for TapStall is dropped.
//
// The members take turns at being first: the feeds' sinks encode and write
// one after another, and in a fixed order the last member's copies would
// always wait for every other member's write.
func (t *tap) hand(ctx context.Context, sb *sharedBatch, stall *time.Timer, turn uint) {
	mems := inTurn(t.attached(), turn)
	sb.share(mems)
	for _, mem := range mems {
		var b *pollBatch
		select {
		case b = <-mem.p.free:
		default:
			stall.Reset(t.m.cfg.TapStall)
			select {
			case b = <-mem.p.free:
			case <-mem.gone:
			case <-ctx.Done():
				return
			case <-stall.C:
				t.evict(mem)
			}
			stall.Stop()
		}
		if b == nil {
			continue
		}
		mem.handMu.Lock()
		select {
		case <-mem.gone:
			mem.p.free <- b
		default:
			if mem.fill(ctx, sb, b) {
				mem.p.work <- b // never blocks: b came from free
			} else {
				mem.p.free <- b
			}
		}
		mem.handMu.Unlock()
	}
}

// inTurn is mems in the order the turn'th poll is handed to them: starting
// with member turn mod len(mems), wrapping around.
func inTurn(mems []*tapMember, turn uint) []*tapMember {
	if len(mems) < 2 {
		return mems
	}
	k := int(turn % uint(len(mems)))
	return slices.Concat(mems[k:], mems[:k])
}

// share has the part of sb's copies' encoding that does not depend on a
// connection made once, when two or more of mems have sinks that encode
// alike (SharedEncoder: synthetic feeds with the same address mappings),
// instead of once per feed. Other sinks ignore it.
func (sb *sharedBatch) share(mems []*tapMember) {
	var best SharedEncoder // of the key most members' sinks have, if two or more
	most := 1
	for i, a := range mems {
		se, ok := a.f.sink.(SharedEncoder)
		if !ok {
			continue
		}
		k, n := se.ShareKey(), 1
		for _, b := range mems[i+1:] {
			if o, ok := b.f.sink.(SharedEncoder); ok && o.ShareKey() == k {
				n++
			}
		}
		if n > most {
			best, most = se, n
		}
	}
	if best == nil {
		return
	}
	if k := best.ShareKey(); sb.encKey != k {
		sb.enc, sb.encKey = best.NewShared(), k
	}
	sb.good = sb.good[:0]
	for i, c := range sb.arena[:sb.used] {
		if sb.errs[i] == nil {
			sb.good = append(sb.good, c)
		}
	}
	sb.enc.Encode(sb.good)
	sb.t.sharedEncodings.Add(int64(len(sb.good)))
	clear(sb.good)
}

// evict detaches a member that took no batch for TapStall.
func (t *tap) evict(mem *tapMember) {
	t.mu.Lock()
	if mem.detached || !slices.Contains(t.members, mem) {
		t.mu.Unlock()
		return
	}
	mem.detached = true
	close(mem.evicted)
	t.mu.Unlock()
	f := mem.f
	f.m.m.tapDrops.WithLabelValues(f.spec.Name).Inc()
	f.log.Warn("feed: took no copies for too long; off the shared reader, reading this node's partitions on its own until it catches up",
		"waited", t.m.cfg.TapStall, "state", f.currentState())
}

// fill puts into b the copies of sb that mem has not had yet and that pass
// its feed's directions and filter; false when there were none to mark.
func (mem *tapMember) fill(ctx context.Context, sb *sharedBatch, b *pollBatch) bool {
	f := mem.f
	b.batch, b.marks, b.dlq, b.redelivered = b.batch[:0], b.marks[:0], b.dlq[:0], 0
	mem.nextMu.Lock()
	defer mem.nextMu.Unlock()
	for i := range sb.parts {
		sp := &sb.parts[i]
		k := tp{sp.topic, sp.partition}
		recs := sp.recs
		j := 0
		if nx, ok := mem.next[k]; ok {
			j, _ = slices.BinarySearchFunc(recs, nx, func(r *kgo.Record, o int64) int {
				switch {
				case r.Offset < o:
					return -1
				case r.Offset > o:
					return 1
				}
				return 0
			})
		}
		if j == len(recs) {
			continue
		}
		last := recs[len(recs)-1]
		f.checkGap(ctx, k.topic, k.partition, recs[j].Offset, last.Offset+1)
		h, seen := f.highDelivered(k)
		for ; j < len(recs); j++ {
			r := recs[j]
			f.admit(b, r, sb.arena[sp.first+j], sb.errs[sp.first+j], seen && r.Offset <= h)
		}
		b.marks = append(b.marks, last)
		mem.advance(k, last.Offset+1)
	}
	if len(b.marks) == 0 {
		return false
	}
	b.mem, b.shared = mem, sb
	sb.refs.Add(1)
	return true
}

// advance notes next as where mem continues in k; mem.nextMu is held. Not for
// a partition revoked meanwhile (another node reads it now): where it
// resumes if it comes back is its group's commit, not a position whose
// copies were never confirmed.
func (mem *tapMember) advance(k tp, next int64) {
	mem.doneMu.Lock()
	gone := mem.revoked[k]
	mem.doneMu.Unlock()
	if !gone {
		mem.next[k] = next
	}
}

// catchUp reads, for a detached member, the partitions the tap holds on
// this node, from where the tap left it (else its group's commit), into
// its pipeline; the tap commits what it confirms. It follows the tap's
// partitions as they change, and once the feed has read on its own for
// Config.RejoinAfter and is connected and at most Config.RejoinLag copies
// behind, it attaches the member again and returns; also when ctx ends.
// It never joins the feed's consumer group: other nodes' taps keep
// reading and committing their partitions for the same feed.
func (mem *tapMember) catchUp(ctx context.Context) {
	t := mem.t
	started := time.Now()
	for ctx.Err() == nil {
		parts, changed := t.assignment()
		if len(parts) == 0 {
			select {
			case <-changed:
			case <-ctx.Done():
			case <-time.After(time.Second): // look at caughtUp now and then
				if mem.rejoin(started) {
					return
				}
			}
			continue
		}
		if mem.readParts(ctx, parts, changed, started) {
			return
		}
	}
}

// rejoin attaches mem again if its feed has read on its own since started
// for Config.RejoinAfter and has caught up.
func (mem *tapMember) rejoin(started time.Time) bool {
	if time.Since(started) <= mem.t.m.cfg.RejoinAfter || !mem.f.caughtUp() {
		return false
	}
	mem.f.log.Info("feed: caught up, back on the shared reader")
	mem.t.attach(mem)
	return true
}

// readParts is catchUp over one set of partitions: true once the member
// is attached again, false when the set changed or ctx ended.
func (mem *tapMember) readParts(ctx context.Context, parts map[tp]bool, changed <-chan struct{}, started time.Time) bool {
	f, t, p := mem.f, mem.t, mem.p
	offs := map[string]map[int32]kgo.Offset{}
	for k := range parts {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.Offset{}
		}
		offs[k.topic][k.partition] = kgo.NewOffset().AtStart()
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	committed, err := t.m.adm.FetchOffsets(lctx, f.group)
	var starts kadm.ListedOffsets
	if err == nil {
		starts, err = t.m.adm.ListStartOffsets(lctx, slices.Collect(maps.Keys(offs))...)
	}
	cancel()
	if err != nil {
		f.setErr(fmt.Errorf("catch up: %w", err))
		sleepCtx(ctx, time.Second)
		return false
	}
	mem.start(offs, committed, starts, map[tp]int64{})
	mem.nextMu.Lock()
	for topic, ps := range offs {
		for part := range ps {
			if at, ok := mem.next[tp{topic, part}]; ok {
				ps[part] = kgo.NewOffset().At(at).WithEpoch(-1)
			}
		}
	}
	mem.nextMu.Unlock()
	cl, err := t.m.cfg.Client.NewClient(readerOpts(true, kgo.ConsumePartitions(offs))...)
	if err != nil {
		f.setErr(err)
		f.log.Error("feed: kafka client", "err", err)
		sleepCtx(ctx, t.m.cfg.BackoffMax)
		return false
	}
	defer cl.Close()
	var lastFetchErr time.Time
	for ctx.Err() == nil {
		select {
		case <-changed:
			return false
		default:
		}
		if mem.rejoin(started) {
			return true
		}
		var b *pollBatch
		select {
		case b = <-p.free:
		case <-changed:
			return false
		case <-ctx.Done():
			return false
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second) // look at changed and caughtUp now and then
		fs := cl.PollRecords(pctx, t.m.cfg.MaxBatch)
		pcancel()
		f.fetchErrors(fs, &lastFetchErr)
		if ctx.Err() != nil || !f.decode(ctx, fs, b) {
			b.release()
			p.free <- b
			continue
		}
		mem.nextMu.Lock()
		for _, r := range b.marks {
			mem.advance(tp{r.Topic, r.Partition}, r.Offset+1)
		}
		mem.nextMu.Unlock()
		b.mem = mem // its confirmations are the member's, which the tap commits
		p.work <- b // never blocks: b came from free
	}
	return false
}

// unref drops one reference; the last recycles the batch and its records.
func (sb *sharedBatch) unref() {
	if sb.refs.Add(-1) != 0 {
		return
	}
	releaseDecoded(sb.arena[:sb.used], func(yield func([]*kgo.Record)) {
		for i := range sb.parts {
			yield(sb.parts[i].recs)
		}
	})
	if sb.enc != nil {
		sb.enc.Reset() // after unpin: no copy points into it now
	}
	clear(sb.errs[:sb.used])
	sb.used = 0
	clear(sb.parts)
	sb.parts = sb.parts[:0]
	select {
	case sb.t.pool <- sb:
	default:
	}
}

// adjust (kgo.AdjustFetchOffsetsFn) starts each newly assigned partition at
// the lowest next offset of the members.
func (t *tap) adjust(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	starts, err := t.m.adm.ListStartOffsets(ctx, slices.Collect(maps.Keys(offs))...)
	if err != nil {
		t.log.Warn("feed tap: list start offsets", "err", err)
		return nil, err
	}
	low := map[tp]int64{}
	for _, mem := range t.attached() {
		committed, err := t.m.adm.FetchOffsets(ctx, mem.f.group)
		if err != nil {
			t.log.Warn("feed tap: fetch committed offsets", "feed", mem.f.spec.Name, "err", err)
			return nil, fmt.Errorf("feed %q: fetch committed offsets: %w", mem.f.spec.Name, err)
		}
		mem.start(offs, committed, starts, low)
	}
	for topic, ps := range offs {
		for p := range ps {
			if at, ok := low[tp{topic, p}]; ok {
				ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
			}
		}
	}
	return offs, nil
}

// start notes where mem resumes in each partition of offs (where the tap
// last left it, else its group's commit, else the log start), counting
// copies retention deleted before it read them, and lowers low to it.
func (mem *tapMember) start(offs map[string]map[int32]kgo.Offset, committed kadm.OffsetResponses, starts kadm.ListedOffsets, low map[tp]int64) {
	f := mem.f
	mem.nextMu.Lock()
	defer mem.nextMu.Unlock()
	mem.doneMu.Lock()
	defer mem.doneMu.Unlock()
	f.expMu.Lock()
	defer f.expMu.Unlock()
	for topic, ps := range offs {
		for p := range ps {
			k := tp{topic, p}
			delete(mem.revoked, k) // ours again
			at, ok := mem.next[k]
			if !ok {
				at = -1
				if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
					at = c.At
				}
				if s, ok := starts.Lookup(topic, p); ok && s.Err == nil {
					if at >= 0 && s.Offset > at {
						f.countLost(topic, p, s.Offset-at)
						at = s.Offset
					} else if at < 0 {
						at = s.Offset
					}
				}
				if at < 0 {
					continue // unknown: the member takes what the tap reads
				}
				mem.next[k] = at
				f.expect[k] = at
			}
			if l, ok := low[k]; !ok || at < l {
				low[k] = at
			}
		}
	}
}

// revoked (kgo.OnPartitionsRevoked, OnPartitionsLost) commits what members
// confirmed and forgets the partitions another node now reads; not when the
// tap itself stops or restarts (ctx ended), as members keep their place.
func (t *tap) revoked(ctx context.Context) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(cbctx context.Context, _ *kgo.Client, parts map[string][]int32) {
		if ctx.Err() != nil {
			return
		}
		t.setParts(parts, false)
		for _, mem := range t.snapshot() {
			_ = mem.commit(cbctx)
			mem.forget(parts)
		}
	}
}

func (mem *tapMember) forget(parts map[string][]int32) {
	mem.nextMu.Lock()
	mem.doneMu.Lock()
	mem.f.expMu.Lock()
	for topic, ps := range parts {
		for _, p := range ps {
			k := tp{topic, p}
			delete(mem.next, k)
			delete(mem.done, k)
			mem.revoked[k] = true
			delete(mem.f.expect, k)
		}
	}
	mem.f.expMu.Unlock()
	mem.doneMu.Unlock()
	mem.nextMu.Unlock()
}

// confirmed notes the marks of a batch the member's sink confirmed, for the
// next commit. Marks of partitions the tap no longer reads (revoked: another
// node reads them now) are left out: committing them would move that node's
// position back.
func (mem *tapMember) confirmed(marks []*kgo.Record) {
	mem.doneMu.Lock()
	defer mem.doneMu.Unlock()
	for _, r := range marks {
		k := tp{r.Topic, r.Partition}
		if mem.revoked[k] {
			continue
		}
		if at, ok := mem.done[k]; !ok || r.Offset+1 > at {
			mem.done[k] = r.Offset + 1
		}
		mem.dirty = true
	}
}

// tapCommitInterval is how often a tap commits its members' offsets, as a
// feed's own reader does (kgo.AutoCommitInterval).
const tapCommitInterval = time.Second

func (t *tap) commitLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(tapCommitInterval)
	defer tick.Stop()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, mem := range t.snapshot() {
			if err := mem.commit(ctx); err != nil && time.Since(lastErr) > 10*time.Second {
				lastErr = time.Now()
				mem.f.log.Warn("feed: commit", "err", err)
			}
		}
	}
}

// commit commits the member's confirmed offsets to its feed's group.
func (mem *tapMember) commit(ctx context.Context) error {
	mem.commitMu.Lock()
	defer mem.commitMu.Unlock()
	mem.doneMu.Lock()
	if !mem.dirty {
		mem.doneMu.Unlock()
		return nil
	}
	offs := kadm.Offsets{}
	for k, at := range mem.done {
		offs.Add(kadm.Offset{Topic: k.topic, Partition: k.partition, At: at, LeaderEpoch: -1})
	}
	mem.dirty = false
	mem.doneMu.Unlock()
	resp, err := mem.t.m.adm.CommitOffsets(ctx, mem.f.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		mem.doneMu.Lock()
		mem.dirty = true
		mem.doneMu.Unlock()
		mem.f.setErr(fmt.Errorf("commit: %w", err))
	}
	return err
}

// finalCommit commits what the member confirmed as it leaves the tap.
func (mem *tapMember) finalCommit() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mem.commit(ctx); err != nil {
		mem.f.log.Warn("feed: final commit", "err", err)
	}
}
