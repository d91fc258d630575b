package director

import (
	"context"
	"slices"
	"time"
)

// hand gives every member its share of sb, waiting for each to have a free
// batch; a member that has none for TapStall is dropped.
//
// The members take turns at being first: the feeds' sinks encode and write
// one after another, and in a fixed order the last member's copies would
// always wait for every other member's write.
func (t *tap) hand(ctx context.Context, sb *decodedPoll, stall *time.Timer, turn uint) {
	mems := inTurn(t.attached(), turn)
	t.sharedEncodings.Add(int64(sb.share(mems)))
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
		if t.takes(mem) && mem.f.take(ctx, sb, b) {
			b.mem = mem     // its confirmations are the member's, which the tap commits
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
// instead of once per feed; it returns how many copies it encoded. Other
// sinks ignore it.
func (sb *decodedPoll) share(mems []*tapMember) int {
	var best SharedEncoder // of the key most members' sinks have, if two or more
	most := 1
	for i, a := range mems {
		se := a.f.sink.shared
		if se == nil {
			continue
		}
		k, n := se.ShareKey(), 1
		if k == nil {
			continue // shares nothing
		}
		for _, b := range mems[i+1:] {
			if o := b.f.sink.shared; o != nil && o.ShareKey() == k {
				n++
			}
		}
		if n > most {
			best, most = se, n
		}
	}
	if best == nil {
		return 0
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
	n := len(sb.good)
	clear(sb.good)
	return n
}

// evict detaches a member that took no batch for TapStall.
func (t *tap) evict(mem *tapMember) {
	var evicted bool
	t.do(func(s *tapState) { evicted = s.evict(mem) })
	if !evicted {
		return
	}
	f := mem.f
	f.m.m.tapDrops.WithLabelValues(f.spec.Name).Inc()
	f.log.Warn("feed: took no copies for too long; off the shared reader, reading this node's partitions on its own until it catches up",
		"waited", t.m.cfg.TapStall, "state", f.currentState())
}

// evict detaches mem, closing its evicted channel; false if it is detached
// already or no longer a member.
func (s *tapState) evict(mem *tapMember) bool {
	if mem.detached || !slices.Contains(s.members, mem) {
		return false
	}
	mem.detached = true
	close(mem.evicted)
	return true
}

// takes reports whether mem is still handed batches (it is not leaving).
func (t *tap) takes(mem *tapMember) bool {
	var ok bool
	t.do(func(s *tapState) { ok = !mem.leaving && slices.Contains(s.members, mem) })
	return ok
}
