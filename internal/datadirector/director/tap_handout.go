package director

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

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
		if t.takes(mem) && mem.fill(ctx, sb, b) {
			mem.p.work <- b // never blocks: b came from free
		} else {
			mem.p.free <- b
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

// takes reports whether mem is still handed batches (it is not leaving).
func (t *tap) takes(mem *tapMember) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !mem.leaving && slices.Contains(t.members, mem)
}

// fill puts into b the copies of sb that mem has not had yet, of the
// partitions its feed holds, and that pass its feed's directions and
// filter; false when there were none to mark.
func (mem *tapMember) fill(ctx context.Context, sb *sharedBatch, b *pollBatch) bool {
	f := mem.f
	b.reset()
	for i := range sb.parts {
		sp := &sb.parts[i]
		k := tp{sp.topic, sp.partition}
		recs := sp.recs
		next, owned := f.led.next(k)
		if !owned {
			continue // not (yet) positioned in it: a rewind comes first
		}
		j := 0
		if next >= 0 {
			j, _ = slices.BinarySearchFunc(recs, next, func(r *kgo.Record, o int64) int {
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
		h := f.led.hand(k, recs[j].Offset, last.Offset+1)
		if !h.owned {
			continue
		}
		f.checkGap(ctx, k, h, recs[j].Offset)
		for ; j < len(recs); j++ {
			r := recs[j]
			f.admit(b, r, sb.arena[sp.first+j], sb.errs[sp.first+j], r.Offset <= h.high)
		}
		b.mark(last, h.epoch)
	}
	if len(b.marks) == 0 {
		return false
	}
	f.followHeld(b)
	f.sequence(b)
	b.mem, b.shared = mem, sb
	sb.refs.Add(1)
	return true
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
