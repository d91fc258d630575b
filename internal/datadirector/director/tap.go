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
// spreads partitions over signalbox nodes; its commits only fence the
// members' (tap.fencedCommit). Where a partition is assigned, reading starts
// at the lowest next offset of the members (what the tap handed them in this
// process, else their groups' commits), and each member skips what it
// already had. A feed joining (or attached again) does not restart the
// reader, which would make the group rebalance on every node: the reader
// moves the partitions it holds back to where that feed is (rewind), between
// two polls.
type tap struct {
	m       *Manager
	key     string
	sources []string
	group   string
	log     *slog.Logger

	mu      sync.Mutex
	members []*tapMember
	joined  time.Time          // last join, to let a burst of joins settle before the first start
	restart context.CancelFunc // ends the running reader (the last leave)
	cl      *kgo.Client        // the running reader's client; nil when there is none
	parts   map[tp]bool        // the partitions the running reader holds on this node
	partsCh chan struct{}      // closed (and replaced) when parts change
	pos     map[tp]int64       // where the reader continues in each partition it holds
	member  string             // the group member id the partitions were assigned to
	rewind  bool               // a member joined or was attached: position it before the next poll
	wake    context.CancelFunc // ends the reader's poll in progress
	kick    chan struct{}      // wakes a reader with no attached member

	polls pollPool

	sharedEncodings atomic.Int64 // copies whose encoding several sinks shared
	proven          atomic.Int64 // when the reader's group membership was last proven (unix ns)
}

// tapSettle is how long a tap waits after a feed joins before it (re)starts
// its reader: feeds start one after another.
const tapSettle = 50 * time.Millisecond

// tapMember is one feed on a tap. Its offsets are its feed's ledger.
type tapMember struct {
	t        *tap
	f        *feed
	p        *pipeline
	detached bool          // under t.mu: dropped for stalling, catching up on its own
	leaving  bool          // under t.mu: the feed stops; handed nothing more
	evicted  chan struct{} // under t.mu: closed when the tap detaches the member (a new one on attach)
	gone     chan struct{} // closed when the member is off the tap (it left)
	handMu   sync.Mutex    // held while the tap hands the member a batch
	commitMu sync.Mutex    // one commit at a time, so they land in order
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
			polls: newPollPool(),
			parts: map[tp]bool{}, partsCh: make(chan struct{}), pos: map[tp]int64{},
			kick: make(chan struct{}, 1), joined: time.Now(),
		}
		m.taps[key] = t
		m.m.declareTap(key)
		go t.run()
	}
	mem := &tapMember{t: t, f: f, p: p, evicted: make(chan struct{}), gone: make(chan struct{})}
	t.mu.Lock()
	t.members = append(t.members, mem)
	t.joined = time.Now() // before the reader's first start: lets a burst of joins settle
	t.poke()
	t.mu.Unlock()
	return mem
}

// poke has the running reader position its members before its next poll,
// ending the poll in progress; t.mu is held.
func (t *tap) poke() {
	t.rewind = true
	if t.wake != nil {
		t.wake()
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// attach puts a detached member back on the tap's pace; the reader
// positions it, as for a join.
func (t *tap) attach(mem *tapMember) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mem.detached = false
	mem.evicted = make(chan struct{})
	t.poke()
}

// evictedCh is the channel closed when mem is next detached.
func (t *tap) evictedCh(mem *tapMember) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return mem.evicted
}

// quiesce has the tap hand mem nothing more and returns once a hand-off in
// progress has ended; mem stays a member (its partitions and commits go on)
// until leave.
func (t *tap) quiesce(mem *tapMember) {
	t.mu.Lock()
	mem.leaving = true
	t.mu.Unlock()
	mem.handMu.Lock()
	mem.handMu.Unlock()
}

// leave takes mem off the tap; the reader stops with the last member.
func (t *tap) leave(mem *tapMember) {
	t.quiesce(mem)
	t.mu.Lock()
	t.remove(mem)
	if len(t.members) == 0 && t.restart != nil {
		t.restart()
	}
	t.mu.Unlock()
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
	return slices.ContainsFunc(t.members, func(mem *tapMember) bool { return !mem.detached && !mem.leaving })
}

// attached is the members the tap hands batches to.
func (t *tap) attached() []*tapMember {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*tapMember
	for _, mem := range t.members {
		if !mem.detached && !mem.leaving {
			out = append(out, mem)
		}
	}
	return out
}

// client is the running reader's client, nil when there is none.
func (t *tap) client() *kgo.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cl
}

// assignment is the partitions the tap holds now, and a channel closed when
// that changes.
func (t *tap) assignment() (map[tp]bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.parts), t.partsCh
}

// addParts notes partitions assigned to the tap and tells the detached
// members' readers.
func (t *tap) addParts(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	t.m.m.tapRebalances.WithLabelValues(t.key).Inc()
	mems := t.snapshot()
	for _, mem := range mems {
		t.m.upstreamRebalance(mem.f.spec.Name, true)
	}
	member, _ := cl.GroupMetadata()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.member != "" && member != t.member && len(t.parts) > 0 {
		// A new member id with partitions kept: the old member was
		// dropped by the group (a join answered UNKNOWN_MEMBER_ID, and
		// franz-go joined again as a new member without calling
		// OnPartitionsLost), so another node may have read and committed
		// them meanwhile. What the members confirmed of them is from the
		// old membership: forget it, and position them again from their
		// groups' commits before the next poll.
		t.log.Warn("feed tap: rejoined as a new group member; positioning its partitions again", "partitions", len(t.parts))
		for k := range t.parts {
			for _, mem := range mems {
				mem.f.led.lose(k)
			}
		}
		t.poke()
	}
	t.member = member
	for topic, ps := range parts {
		for _, p := range ps {
			t.parts[tp{topic, p}] = true
		}
	}
	t.partsChanged()
}

// dropParts forgets partitions the tap gave up or lost and tells the
// detached members' readers.
func (t *tap) dropParts(parts map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	eachPart(parts, func(k tp) {
		delete(t.parts, k)
		delete(t.pos, k)
	})
	t.partsChanged()
}

// clearParts drops every partition: the reader stopped.
func (t *tap) clearParts() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.pos)
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
		kgo.SessionTimeout(t.m.cfg.SessionTimeout),
		kgo.HeartbeatInterval(heartbeat(t.m.cfg.SessionTimeout)),
		kgo.AdjustFetchOffsetsFn(t.adjust),
		kgo.OnPartitionsAssigned(t.addParts),
		kgo.OnPartitionsRevoked(t.revoked),
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
	t.mu.Lock()
	t.cl, t.rewind = cl, false // the first assignment positions every member (adjust)
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.cl = nil
		t.mu.Unlock()
		cl.Close() // revokes what it holds: members commit and forget it
		t.clearParts()
	}()
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	var lastFetchErr, lastUnproven time.Time
	var turn uint // which attached member is handed the next poll first
	for ctx.Err() == nil {
		if t.takeRewind() {
			if err := t.rewindReader(ctx, cl); err != nil {
				t.log.Warn("feed tap: position joining feeds", "err", err)
				sleepCtx(ctx, time.Second)
				t.mu.Lock()
				t.rewind = true
				t.mu.Unlock()
				continue
			}
		}
		if !t.anyAttached() {
			// Every member is catching up on its own: hold the partitions
			// for them without reading, until one is attached.
			select {
			case <-ctx.Done():
			case <-t.kick:
			}
			continue
		}
		pctx, wake := context.WithCancel(ctx)
		t.mu.Lock()
		t.wake = wake
		t.mu.Unlock()
		fs := cl.PollRecords(pctx, t.m.cfg.MaxBatch)
		t.mu.Lock()
		t.wake = nil
		t.mu.Unlock()
		wake()
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
			// After a pause (a stopped process, a long GC, a cut-off
			// network) the poll may be of partitions the group has given
			// away meanwhile, fetched before the pause: hand it out only
			// once membership is proven again. Until then it is read
			// again, not dropped: if the group has given the partitions
			// away, its callbacks follow and the new owner delivers it;
			// if it still has this member (its coordinator was
			// unreachable, or busy rebalancing), no callback repositions
			// the reader.
			if t.stale() {
				if err := t.prove(ctx, cl); err != nil {
					if time.Since(lastUnproven) > 10*time.Second {
						lastUnproven = time.Now()
						t.log.Warn("feed tap: membership not proven after a pause; the poll is read again", "err", err)
					}
					t.unread(cl, sb)
					sb.unref()
					sleepCtx(ctx, heartbeat(t.m.cfg.SessionTimeout))
					continue
				}
			}
			t.hand(ctx, sb, stall, turn)
			turn++
			sb.unref() // the tap's own reference
		}
	}
}

// takeRewind reports (and clears) a pending rewind.
func (t *tap) takeRewind() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rewind
	t.rewind = false
	return r
}

// rewindReader positions the attached members that joined or were attached
// in the partitions the reader holds, and moves the reader back in each
// partition where one of them is behind it. The group is not disturbed:
// franz-go drops what it buffered of those partitions and fetches again.
func (t *tap) rewindReader(ctx context.Context, cl *kgo.Client) error {
	parts, _ := t.assignment()
	offs := map[string]map[int32]kgo.Offset{}
	for k := range parts {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.Offset{}
		}
		offs[k.topic][k.partition] = kgo.NewOffset()
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	low, err := t.position(lctx, t.attached(), offs)
	if err != nil {
		return err
	}
	t.moveBack(cl, low)
	return nil
}

// moveBack moves the reader back to the offsets of to in the partitions it
// holds and is past them (franz-go drops what it buffered of those and
// fetches again), counting a rewind.
func (t *tap) moveBack(cl *kgo.Client, to map[tp]int64) {
	t.mu.Lock()
	for k, at := range to {
		if p, ok := t.pos[k]; ok && at >= p || !t.parts[k] {
			delete(to, k)
			continue
		}
		t.pos[k] = at
	}
	t.mu.Unlock()
	if len(to) > 0 {
		cl.SetOffsets(epochOffsets(to))
		t.m.m.tapRewinds.WithLabelValues(t.key).Inc()
	}
}

// epochOffsets is to as SetOffsets takes it.
func epochOffsets(to map[tp]int64) map[string]map[int32]kgo.EpochOffset {
	set := map[string]map[int32]kgo.EpochOffset{}
	for k, at := range to {
		if set[k.topic] == nil {
			set[k.topic] = map[int32]kgo.EpochOffset{}
		}
		set[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
	}
	return set
}

// unread moves the reader back to the start of sb in the partitions it
// still holds, so the next polls fetch sb's copies again.
func (t *tap) unread(cl *kgo.Client, sb *decodedPoll) {
	to := make(map[tp]int64, len(sb.parts))
	for _, sp := range sb.parts {
		to[sp.k] = sp.recs[0].Offset
	}
	t.moveBack(cl, to)
}

// decode notes where the reader continues in the partitions it holds and
// decodes the poll once; nil when it held no records.
func (t *tap) decode(fs kgo.Fetches) *decodedPoll {
	t.mu.Lock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if k := (tp{p.Topic, p.Partition}); len(p.Records) > 0 && t.parts[k] {
			t.pos[k] = p.Records[len(p.Records)-1].Offset + 1
		}
	})
	t.mu.Unlock()
	return t.polls.decode(fs, false)
}
