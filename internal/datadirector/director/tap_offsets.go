package director

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adjust (kgo.AdjustFetchOffsetsFn) starts each newly assigned partition at
// the lowest next offset of the attached members.
func (t *tap) adjust(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	low, err := t.position(ctx, t.attached(), offs)
	if err != nil {
		return nil, err
	}
	t.do(func(s *tapState) {
		for topic, ps := range offs {
			for p := range ps {
				if at, ok := low[tp{topic, p}]; ok {
					ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
					s.pos[tp{topic, p}] = at
				}
			}
		}
	})
	return offs, nil
}

// position starts mems in the partitions of offs they do not hold yet and
// returns, per partition, the lowest offset where one of them continues.
func (t *tap) position(ctx context.Context, mems []*tapMember, offs map[string]map[int32]kgo.Offset) (map[tp]int64, error) {
	low := map[tp]int64{}
	if len(mems) == 0 || len(offs) == 0 {
		return low, nil
	}
	starts, err := t.m.adm.ListStartOffsets(ctx, slices.Collect(maps.Keys(offs))...)
	if err != nil {
		t.log.Warn("feed tap: list start offsets", "err", err)
		return nil, err
	}
	for _, mem := range mems {
		committed, err := t.m.committed(ctx, mem.f.group, partsOf(offs))
		if err != nil {
			t.log.Warn("feed tap: fetch committed offsets", "feed", mem.f.spec.Name, "err", err)
			return nil, fmt.Errorf("feed %q: fetch committed offsets: %w", mem.f.spec.Name, err)
		}
		mem.start(offs, committed, starts, low)
	}
	return low, nil
}

// start notes where mem resumes in each partition of offs (where the tap
// last left it, else its group's commit, else the log start), counting
// copies retention deleted before it read them, and lowers low to it.
// Partitions the tap no longer holds are left alone: the group took them
// while their commits were fetched, and starting one would make the ledger
// own (and commit) a partition another node reads.
func (mem *tapMember) start(offs map[string]map[int32]kgo.Offset, committed kadm.OffsetResponses, starts kadm.ListedOffsets, low map[tp]int64) {
	mem.t.do(func(s *tapState) { s.start(mem, offs, committed, starts, low) })
}

// start is tapMember.start on the tap's state loop.
func (s *tapState) start(mem *tapMember, offs map[string]map[int32]kgo.Offset, committed kadm.OffsetResponses, starts kadm.ListedOffsets, low map[tp]int64) {
	for topic, ps := range offs {
		for p := range ps {
			k := tp{topic, p}
			if !s.parts[k] {
				continue
			}
			at, owned := mem.f.led.next(k)
			if !owned || at < 0 {
				at = mem.f.startAt(k, committed, starts)
				mem.f.led.assign(k, at)
				if at < 0 {
					continue // unknown: the member takes what the tap reads
				}
			}
			if l, ok := low[k]; !ok || at < l {
				low[k] = at
			}
		}
	}
}

// startAt is where the feed starts reading k in a new assignment: its
// group's commit, moved up to the log start (counting what retention
// deleted unread), else the log start; -1 if neither is known.
func (f *feed) startAt(k tp, committed kadm.OffsetResponses, starts kadm.ListedOffsets) int64 {
	at := int64(-1)
	if c, ok := committed.Lookup(k.topic, k.partition); ok && c.Err == nil && c.At >= 0 {
		at = c.At
	}
	if s, ok := starts.Lookup(k.topic, k.partition); ok && s.Err == nil {
		if at >= 0 && s.Offset > at {
			f.countLost(k.topic, k.partition, s.Offset-at)
			at = s.Offset
		} else if at < 0 {
			at = s.Offset
		}
	}
	return at
}

// revoked (kgo.OnPartitionsRevoked) commits what members confirmed of the
// partitions the tap gives up and forgets them. franz-go calls it while the
// tap is still a member of the generation that held them (a cooperative
// rebalance, or leaving the group as the reader stops), before any other
// node is given them: these commits need no fence, unless the tap's
// membership has not been proven for a third of a session timeout (see
// below).
func (t *tap) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	if t.proof.stale() {
		// After a pause past the session timeout the group has dropped
		// this member: the client joins again as a new member and
		// franz-go revokes, from the new assignment's point of view,
		// partitions another node has owned (and committed past) since.
		// What the ledger holds of them is from before the pause: commit
		// nothing, as for lost partitions.
		t.partitionsLost(ctx, cl, parts)
		return
	}
	for _, mem := range t.snapshot() {
		t.m.upstreamRebalance(mem.f.spec.Name, false)
	}
	t.dropParts(parts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, mem := range t.snapshot() {
		offs := map[tp]pendingCommit{}
		eachPart(parts, func(k tp) {
			if c, ok := mem.f.led.revoke(k); ok {
				offs[k] = c
			}
		})
		if err := mem.commitOffsets(ctx, offs); err != nil {
			mem.f.log.Warn("feed: commit on revoke", "err", err)
		}
	}
}

// partitionsLost (kgo.OnPartitionsLost) forgets partitions the tap lost without
// committing: the group has given them to another node, which may have read
// and committed past them meanwhile (this node was paused past its session
// timeout, or cut off), and a commit from here would move that position back.
// What members confirmed of them is delivered again by the new owner
// (at-least-once).
func (t *tap) partitionsLost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	for _, mem := range t.snapshot() {
		t.m.upstreamRebalance(mem.f.spec.Name, false)
	}
	t.dropParts(parts)
	for _, mem := range t.snapshot() {
		eachPart(parts, mem.f.led.lose)
	}
}

// commitInterval is how often a tap commits its members' offsets, and a
// feed's own reader its own (commitOwn).
const commitInterval = time.Second

func (t *tap) commitLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	commitEvery(ctx, func(ctx context.Context) error { return t.fencedCommit(ctx, t.snapshot()) },
		func(err error) { t.log.Warn("feed tap: commit", "err", err) })
}

// commitEvery calls commit every commitInterval until ctx ends, and failed
// with its errors, one per burst (at most one in 10 s).
func commitEvery(ctx context.Context, commit func(context.Context) error, failed func(error)) {
	tick := time.NewTicker(commitInterval)
	defer tick.Stop()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := commit(ctx); err != nil && ctx.Err() == nil && time.Since(lastErr) > 10*time.Second {
			lastErr = time.Now()
			failed(err)
		}
	}
}

// errNotMember is a fenced commit (or a proof, membership.prove) refused
// because the reader is not (or no longer) a member of its group's current
// generation.
var errNotMember = errors.New("the reader is not a member of its group's current generation")

// fencedCommit commits what mems confirmed into their feeds' groups, but
// only after proving that the tap is still a member of its group's current
// generation: it first commits the tap's own group through its group
// member, which the broker refuses from a member it no longer has (a node
// paused past its session timeout, or cut off, whose partitions were given
// to another node: a "zombie"). A successful commit also renews the tap's
// session, so the group cannot have given the partitions away for a session
// timeout after it; the feeds' commits must reach the broker within half of
// that (their context's deadline), else they wait for the next round.
func (t *tap) fencedCommit(ctx context.Context, mems []*tapMember) error {
	pend := make([]map[tp]pendingCommit, len(mems))
	fence := map[string]map[int32]kgo.EpochOffset{}
	for i, mem := range mems {
		pend[i] = mem.f.led.pending()
		for k, c := range pend[i] {
			if fence[k.topic] == nil {
				fence[k.topic] = map[int32]kgo.EpochOffset{}
			}
			// The tap's own group keeps the lowest: informational
			// only, as each member starts from its own group.
			if o, ok := fence[k.topic][k.partition]; !ok || c.at < o.Offset {
				fence[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: c.at}
			}
		}
	}
	if len(fence) == 0 {
		return nil
	}
	cl := t.client()
	if cl == nil {
		return errNotMember
	}
	began := time.Now()
	if err := t.fence(ctx, cl, fence); err != nil {
		return err
	}
	lctx, cancel := context.WithDeadline(ctx, began.Add(t.m.cfg.SessionTimeout/2))
	defer cancel()
	var errs []error
	for i, mem := range mems {
		// franz-go holds a commit while the client joins the group, so
		// after a pause the fence may pass as the member of a generation
		// joined since pending() was taken: what an earlier epoch
		// confirmed is not this membership's to commit.
		if err := mem.commitOffsets(lctx, mem.f.led.current(pend[i])); err != nil {
			errs = append(errs, fmt.Errorf("feed %q: %w", mem.f.spec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// fence commits offs into the tap's own group through its group member,
// which the broker refuses unless the member is in the current generation,
// and notes when that was last proven.
func (t *tap) fence(ctx context.Context, cl *kgo.Client, offs map[string]map[int32]kgo.EpochOffset) error {
	var ferr error
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			ferr = err
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && ferr == nil {
					ferr = err
				}
			}
		}
	})
	if ferr != nil {
		t.m.m.fencedCommits.WithLabelValues(t.key).Inc()
		return fmt.Errorf("%w: %w", errNotMember, ferr)
	}
	t.proof.note()
	return nil
}

// prove proves the tap's membership by committing where it is in the
// partitions it holds into its own group.
func (t *tap) prove(ctx context.Context, cl *kgo.Client) error {
	var offs map[string]map[int32]kgo.EpochOffset
	t.do(func(s *tapState) { offs = epochOffsets(s.pos) })
	if len(offs) == 0 {
		return nil
	}
	return t.fence(ctx, cl, offs)
}

// commitOffsets commits offs to the member's feed's group and notes them
// committed.
func (mem *tapMember) commitOffsets(ctx context.Context, offs map[tp]pendingCommit) error {
	if len(offs) == 0 {
		return nil
	}
	mem.f.commitMu.Lock() // one commit at a time, so they land in order
	defer mem.f.commitMu.Unlock()
	ko := kadm.Offsets{}
	for k, c := range offs {
		ko.Add(kadm.Offset{Topic: k.topic, Partition: k.partition, At: c.at, LeaderEpoch: -1})
	}
	resp, err := mem.t.m.adm.CommitOffsets(ctx, mem.f.group, ko)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		mem.f.setErr(fmt.Errorf("commit: %w", err))
		return err
	}
	mem.f.led.committedUpTo(offs)
	return nil
}
