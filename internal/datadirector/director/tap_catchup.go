package director

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
	offs := offsetsAt(parts, kgo.NewOffset().AtStart())
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	committed, err := t.m.committed(lctx, f.group, partsOf(offs))
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
	for topic, ps := range offs {
		for part := range ps {
			if at, _ := f.led.next(tp{topic, part}); at >= 0 {
				ps[part] = kgo.NewOffset().At(at).WithEpoch(-1)
			}
		}
	}
	cl, err := t.m.cfg.Client.NewClient(readerOpts(true, kgo.ConsumePartitions(offs))...)
	if err != nil {
		f.setErr(err)
		f.log.Error("feed: kafka client", "err", err)
		sleepCtx(ctx, t.m.cfg.BackoffMax)
		return false
	}
	defer cl.Close()
	// After a pause the tap's partitions may be another node's now: a poll
	// is read again once the tap is proven a member (if it is not, its
	// group's callbacks change the partitions and end this read).
	rd := &reader{
		src: cl, maxBatch: t.m.cfg.MaxBatch, log: f.log, what: "feed catching up", failed: f.setErr,
		proof: &t.proof, prove: t.proveNow,
		unread: func(to map[tp]int64) { setOffsets(cl, to) }, retry: heartbeat(t.m.cfg.SessionTimeout),
	}
	polls := newPollPool()
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
		fs := rd.poll(ctx, pctx, nil)
		pcancel()
		if ctx.Err() != nil || !f.takePoll(ctx, polls, fs, b) {
			p.free <- b
			continue
		}
		b.mem = mem // its confirmations are the member's, which the tap commits
		p.work <- b // never blocks: b came from free
	}
	return false
}

// proveNow proves the tap's membership (prove) for a detached member's
// read.
func (t *tap) proveNow(ctx context.Context) error {
	cl := t.client()
	if cl == nil {
		return errors.New("the feed tap has no reader")
	}
	return t.prove(ctx, cl)
}
