package director

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/nfcopy"
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
		kgo.OnPartitionsLost(t.partitionsLost),
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
