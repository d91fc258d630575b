package director

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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

// revoked (kgo.OnPartitionsRevoked) commits what members confirmed and
// forgets the partitions another node now reads; not when the tap itself
// stops or restarts (ctx ended), as members keep their place.
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

// partitionsLost (kgo.OnPartitionsLost) forgets partitions the tap lost without
// committing: the group has given them to another node, which may have read
// and committed past them meanwhile (this node was paused past its session
// timeout, or cut off), and a commit from here would move that position back.
// What members confirmed of them is delivered again by the new owner
// (at-least-once).
func (t *tap) partitionsLost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	t.setParts(parts, false)
	for _, mem := range t.snapshot() {
		mem.forget(parts)
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
