package director

import (
	"context"
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
//
// The tap's state (tapState) is owned by one goroutine, its state loop
// (tap.loop): the reader, its commit loop, franz-go's group callbacks, the
// member feeds and their catch-up readers read and change it by handing the
// loop a function (tap.do). The loop runs nothing but those functions, which
// never wait on the network or on the Kafka client, so a group callback
// waiting on the loop cannot hold up the client that called it.
type tap struct {
	m       *Manager
	key     string
	sources []string
	group   string
	log     *slog.Logger

	ops  chan tapOp    // the state loop's work (do)
	quit chan struct{} // closed when the tap ends: the state loop stops
	kick chan struct{} // wakes a reader with no attached member

	polls pollPool // the reader's

	sharedEncodings atomic.Int64 // copies whose encoding several sinks shared
	proof           lastProof    // when the reader's group membership was last proven (tap.fence)
}

// tapState is what the tap knows of its members and partitions. Only the
// tap's state loop touches it (and a tapMember's detached, leaving and
// evicted); its methods are the tap's transitions, each run whole.
type tapState struct {
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
	kick    chan<- struct{}    // the tap's: wakes a reader with no attached member
}

// tapOp is a function for the state loop, and where it says it has run.
type tapOp struct {
	fn   func(*tapState)
	done chan struct{}
}

// tapDone recycles do's completion channels (buffered, one slot).
var tapDone = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// newTap makes the tap of a source set and starts its state loop; its
// reader is started by run.
func (m *Manager) newTap(key string, sources []string) *tap {
	t := &tap{
		m: m, key: key, sources: sources, group: m.cfg.GroupPrefix + "tap." + strings.Join(sources, "+"),
		log:   m.log.With("tap", key),
		polls: newPollPool(),
		ops:   make(chan tapOp), quit: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	t.proof.session = m.cfg.SessionTimeout
	go t.loop(&tapState{joined: time.Now(), parts: map[tp]bool{}, partsCh: make(chan struct{}), pos: map[tp]int64{}, kick: t.kick})
	return t
}

// loop runs the functions handed to do, one at a time, until the tap ends.
func (t *tap) loop(s *tapState) {
	for {
		select {
		case op := <-t.ops:
			op.fn(s)
			op.done <- struct{}{}
		case <-t.quit:
			return
		}
	}
}

// do runs fn on the tap's state loop and returns once it has run; false
// (fn not run) when the tap has ended.
func (t *tap) do(fn func(s *tapState)) bool {
	done := tapDone.Get().(chan struct{})
	defer tapDone.Put(done)
	select {
	case t.ops <- tapOp{fn, done}:
		<-done
		return true
	case <-t.quit:
		return false
	}
}

// tapSettle is how long a tap waits after a feed joins before it (re)starts
// its reader: feeds start one after another.
const tapSettle = 50 * time.Millisecond

// tapMember is one feed on a tap. Its offsets are its feed's ledger; its
// commits are the feed's (feed.commitMu).
type tapMember struct {
	t        *tap
	f        *feed
	p        *pipeline
	detached bool          // the state loop's: dropped for stalling, catching up on its own
	leaving  bool          // the state loop's: the feed stops; handed nothing more
	evicted  chan struct{} // the state loop's: closed when the tap detaches the member (a new one on attach)
	gone     chan struct{} // closed when the member is off the tap (it left)
	handMu   sync.Mutex    // held while the tap hands the member a batch
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
	m.rmu.Lock()
	defer m.rmu.Unlock()
	t := m.taps[key]
	if t == nil {
		t = m.newTap(key, sources)
		m.taps[key] = t
		m.m.declareTap(key)
		go t.run()
	}
	mem := &tapMember{t: t, f: f, p: p, evicted: make(chan struct{}), gone: make(chan struct{})}
	t.do(func(s *tapState) {
		s.members = append(s.members, mem)
		s.joined = time.Now() // before the reader's first start: lets a burst of joins settle
		s.poke()
	})
	return mem
}

// poke has the running reader position its members before its next poll,
// ending the poll in progress.
func (s *tapState) poke() {
	s.rewind = true
	if s.wake != nil {
		s.wake()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// attach puts a detached member back on the tap's pace; the reader
// positions it, as for a join.
func (t *tap) attach(mem *tapMember) {
	t.do(func(s *tapState) { s.attach(mem) })
}

// attach puts mem back on the tap's pace, with a new evicted channel.
func (s *tapState) attach(mem *tapMember) {
	mem.detached = false
	mem.evicted = make(chan struct{})
	s.poke()
}

// evictedCh is the channel closed when mem is next detached (nil once the
// tap has ended).
func (t *tap) evictedCh(mem *tapMember) <-chan struct{} {
	var ch chan struct{}
	t.do(func(*tapState) { ch = mem.evicted })
	return ch
}

// quiesce has the tap hand mem nothing more and returns once a hand-off in
// progress has ended; mem stays a member (its partitions and commits go on)
// until leave. After it, no take of mem's may touch its feed's ledger,
// which the feed's next incarnation shares: hence handMu, held from the
// check that mem takes through its take and the batch's queueing.
func (t *tap) quiesce(mem *tapMember) {
	t.do(func(*tapState) { mem.leaving = true })
	mem.handMu.Lock()
	mem.handMu.Unlock()
}

// leave takes mem off the tap; the reader stops with the last member.
func (t *tap) leave(mem *tapMember) {
	t.quiesce(mem)
	t.do(func(s *tapState) {
		s.remove(mem)
		if len(s.members) == 0 && s.restart != nil {
			s.restart()
		}
	})
}

// remove takes mem out of the members and closes gone, once.
func (s *tapState) remove(mem *tapMember) bool {
	i := slices.Index(s.members, mem)
	if i < 0 {
		return false
	}
	s.members = slices.Delete(s.members, i, i+1)
	close(mem.gone)
	return true
}

// snapshot is every member, attached or detached: both commit and both
// forget revoked partitions.
func (t *tap) snapshot() []*tapMember {
	var out []*tapMember
	t.do(func(s *tapState) { out = slices.Clone(s.members) })
	return out
}

// attached is the members the tap hands batches to.
func (s *tapState) attached() []*tapMember {
	var out []*tapMember
	for _, mem := range s.members {
		if !mem.detached && !mem.leaving {
			out = append(out, mem)
		}
	}
	return out
}

// anyAttached reports whether the tap hands batches to any member.
func (s *tapState) anyAttached() bool {
	return slices.ContainsFunc(s.members, func(mem *tapMember) bool { return !mem.detached && !mem.leaving })
}

// attached is the members the tap hands batches to.
func (t *tap) attached() []*tapMember {
	var out []*tapMember
	t.do(func(s *tapState) { out = s.attached() })
	return out
}

// client is the running reader's client, nil when there is none.
func (t *tap) client() *kgo.Client {
	var cl *kgo.Client
	t.do(func(s *tapState) { cl = s.cl })
	return cl
}

// assignment is the partitions the tap holds now, and a channel closed when
// that changes (nil once the tap has ended).
func (t *tap) assignment() (map[tp]bool, <-chan struct{}) {
	var parts map[tp]bool
	var ch chan struct{}
	t.do(func(s *tapState) { parts, ch = maps.Clone(s.parts), s.partsCh })
	return parts, ch
}

// addParts (kgo.OnPartitionsAssigned) notes partitions assigned to the tap
// and tells the detached members' readers.
func (t *tap) addParts(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
	t.m.m.tapRebalances.WithLabelValues(t.key).Inc()
	for _, mem := range t.snapshot() {
		t.m.upstreamRebalance(mem.f.spec.Name, true)
	}
	member, _ := cl.GroupMetadata()
	var kept int
	t.do(func(s *tapState) { kept = s.assigned(member, parts) })
	if kept > 0 {
		t.log.Warn("feed tap: rejoined as a new group member; positioning its partitions again", "partitions", kept)
	}
}

// assigned notes parts assigned to member and returns how many partitions
// it held already under another member id, now positioned again.
func (s *tapState) assigned(member string, parts map[string][]int32) int {
	kept := 0
	if s.member != "" && member != s.member && len(s.parts) > 0 {
		// A new member id with partitions kept: the old member was
		// dropped by the group (a join answered UNKNOWN_MEMBER_ID, and
		// franz-go joined again as a new member without calling
		// OnPartitionsLost), so another node may have read and committed
		// them meanwhile. What the members confirmed of them is from the
		// old membership: forget it, and position them again from their
		// groups' commits before the next poll.
		kept = len(s.parts)
		for k := range s.parts {
			for _, mem := range s.members {
				mem.f.led.lose(k)
			}
		}
		s.poke()
	}
	s.member = member
	for topic, ps := range parts {
		for _, p := range ps {
			s.parts[tp{topic, p}] = true
		}
	}
	s.partsChanged()
	return kept
}

// dropParts forgets partitions the tap gave up or lost and tells the
// detached members' readers.
func (t *tap) dropParts(parts map[string][]int32) {
	t.do(func(s *tapState) {
		eachPart(parts, func(k tp) {
			delete(s.parts, k)
			delete(s.pos, k)
		})
		s.partsChanged()
	})
}

// clear drops every partition: the reader stopped.
func (s *tapState) clear() {
	clear(s.pos)
	if len(s.parts) > 0 {
		clear(s.parts)
		s.partsChanged()
	}
}

// partsChanged wakes the readers waiting on partsCh.
func (s *tapState) partsChanged() {
	close(s.partsCh)
	s.partsCh = make(chan struct{})
}

// run reads for the members until none is left.
func (t *tap) run() {
	defer close(t.quit) // last: the commit loop stops first
	cctx, stopCommits := context.WithCancel(context.Background())
	commits := make(chan struct{})
	go t.commitLoop(cctx, commits)
	defer func() {
		stopCommits()
		<-commits
	}()
	for {
		t.m.rmu.Lock() // a feed joining now finds this tap, or none
		var left bool
		var settle time.Duration
		t.do(func(s *tapState) { left, settle = len(s.members) == 0, tapSettle-time.Since(s.joined) })
		if left || t.m.base.Err() != nil {
			if t.m.taps[t.key] == t {
				delete(t.m.taps, t.key)
			}
			t.m.rmu.Unlock()
			return
		}
		if settle > 0 {
			t.m.rmu.Unlock()
			time.Sleep(settle)
			continue
		}
		ctx, cancel := context.WithCancel(t.m.base)
		t.do(func(s *tapState) { s.restart = cancel })
		t.m.rmu.Unlock()

		t.consume(ctx)
		cancel()
		t.do(func(s *tapState) { s.restart = nil })
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
	t.do(func(s *tapState) { s.cl, s.rewind = cl, false }) // the first assignment positions every member (adjust)
	defer func() {
		t.do(func(s *tapState) { s.cl = nil })
		cl.Close() // revokes what it holds: members commit and forget it
		t.do((*tapState).clear)
	}()
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	rd := &reader{
		src: cl, maxBatch: t.m.cfg.MaxBatch, log: t.log, what: "feed tap",
		failed: func(err error) {
			for _, mem := range t.snapshot() {
				mem.f.setErr(err)
			}
		},
		proof: &t.proof, prove: func(ctx context.Context) error { return t.prove(ctx, cl) },
		unread: func(to map[tp]int64) { t.moveBack(cl, to) }, retry: heartbeat(t.m.cfg.SessionTimeout),
	}
	polled := func(fs kgo.Fetches) {
		t.do(func(s *tapState) {
			s.wake = nil
			s.polled(fs)
		})
	}
	var turn uint // which attached member is handed the next poll first
	for ctx.Err() == nil {
		if t.takeRewind() {
			if err := t.rewindReader(ctx, cl); err != nil {
				t.log.Warn("feed tap: position joining feeds", "err", err)
				sleepCtx(ctx, time.Second)
				t.do(func(s *tapState) { s.rewind = true })
				continue
			}
		}
		pctx, wake := context.WithCancel(ctx)
		var reading bool
		t.do(func(s *tapState) {
			if reading = s.anyAttached(); reading {
				s.wake = wake // a join or an attach ends the poll
			}
		})
		if !reading {
			// Every member is catching up on its own: hold the partitions
			// for them without reading, until one is attached.
			wake()
			select {
			case <-ctx.Done():
			case <-t.kick:
			}
			continue
		}
		fs := rd.poll(ctx, pctx, polled)
		wake()
		if sb := t.polls.decode(fs, false); sb != nil {
			t.hand(ctx, sb, stall, turn)
			turn++
			sb.unref() // the tap's own reference
		}
	}
}

// takeRewind reports (and clears) a pending rewind.
func (t *tap) takeRewind() bool {
	var r bool
	t.do(func(s *tapState) { r, s.rewind = s.rewind, false })
	return r
}

// rewindReader positions the attached members that joined or were attached
// in the partitions the reader holds, and moves the reader back in each
// partition where one of them is behind it. The group is not disturbed:
// franz-go drops what it buffered of those partitions and fetches again.
func (t *tap) rewindReader(ctx context.Context, cl *kgo.Client) error {
	parts, _ := t.assignment()
	offs := offsetsAt(parts, kgo.NewOffset())
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
	t.do(func(s *tapState) { s.moveBack(to) })
	if len(to) > 0 {
		cl.SetOffsets(epochOffsets(to))
		t.m.m.tapRewinds.WithLabelValues(t.key).Inc()
	}
}

// moveBack keeps of to the partitions the reader holds and is past, and
// notes that it continues there.
func (s *tapState) moveBack(to map[tp]int64) {
	for k, at := range to {
		if p, ok := s.pos[k]; ok && at >= p || !s.parts[k] {
			delete(to, k)
			continue
		}
		s.pos[k] = at
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

// polled notes where the reader continues in the partitions it holds.
func (s *tapState) polled(fs kgo.Fetches) {
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if k := (tp{p.Topic, p.Partition}); len(p.Records) > 0 && s.parts[k] {
			s.pos[k] = p.Records[len(p.Records)-1].Offset + 1
		}
	})
}
