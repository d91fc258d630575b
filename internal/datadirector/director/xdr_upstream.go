package director

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// pausingClock is a clock that can stand still: the time it tells does not
// advance while anything holds it, and goes on from there when the last
// hold is released.
type pausingClock struct {
	mu       sync.Mutex
	offset   time.Duration   // total time held
	pausedAt time.Time       // zero when running
	holds    map[string]bool // why it stands
}

func (c *pausingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.IsZero() {
		return c.pausedAt.Add(-c.offset)
	}
	return time.Now().Add(-c.offset)
}

// hold stops the clock for reason; false if reason held it already.
func (c *pausingClock) hold(reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds[reason] {
		return false
	}
	if c.holds == nil {
		c.holds = map[string]bool{}
	}
	c.holds[reason] = true
	if c.pausedAt.IsZero() {
		c.pausedAt = time.Now()
	}
	return true
}

// release drops reason's hold; the clock goes on when none is left. It
// returns how long the clock stood, 0 if it still stands or reason did not
// hold it.
func (c *pausingClock) release(reason string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holds[reason] {
		return 0
	}
	delete(c.holds, reason)
	if len(c.holds) > 0 || c.pausedAt.IsZero() {
		return 0
	}
	d := time.Since(c.pausedAt)
	c.offset += d
	c.pausedAt = time.Time{}
	return d
}

// Upstream stalls. The correlating stage of a re-keyed xdr feed gets a
// transaction's copies from the first stage, which reads the NF topics on
// every node. When a node dies, its share of the NF partitions is not read
// until the group's session timeout has passed and another node took them
// over; meanwhile the correlating stage holds transactions whose other
// copies are stuck there, and its timeout (5 s by default, against Kafka's
// 45 s session) would emit them as response_timeout or partial, and their
// late copies as orphans. So the correlator's clock stands still while a
// partition of the first stage is stalled: copies wait in it unread (its
// group's commit is behind the log end) and its commit has not moved for
// upstreamStallAfter. Timeouts, lingering and the commit hold all wait;
// duplicates the new owner produces again fall on live transactions or on
// tombstones that have not aged. A stall longer than two session timeouts and a
// transaction timeout (the first stage is gone, not moving) no longer
// holds the clock.
const (
	holdStall          = "stall"
	holdRebalance      = "rebalance"
	upstreamCheck      = 500 * time.Millisecond
	upstreamStallAfter = 2*commitInterval + 500*time.Millisecond
)

// watchUpstream holds the correlator's clock while the first stage's
// group (upstream) has a stalled partition.
func (s *xdrStage) watchUpstream(ctx context.Context, upstream string, timeout time.Duration) {
	defer close(s.upDone)
	f := s.f
	maxHold := 2*f.m.cfg.SessionTimeout + timeout
	seen := map[tp]upstreamProgress{}
	defer s.clock.release(holdStall)
	s.every(ctx, upstreamCheck, func() bool {
		stalled, err := s.stalledUpstream(ctx, upstream, seen, maxHold)
		if err != nil {
			return true // unknown: leave the clock as it is
		}
		if len(stalled) > 0 {
			if s.clock.hold(holdStall) {
				f.m.m.upstreamStalls.WithLabelValues(f.spec.Name).Inc()
				f.log.Warn("xdr feed: re-key stage stalled; transaction timeouts wait for it",
					"partitions", len(stalled), "first", stalled[0].topic, "partition", stalled[0].partition)
			}
		} else if d := s.clock.release(holdStall); d > 0 {
			f.log.Info("xdr feed: re-key stage moving again; timeouts go on", "held", d.Round(time.Millisecond))
		}
		return true
	})
}

// upstreamProgress is where a partition of the re-key stage was last seen
// committed, and since when.
type upstreamProgress struct {
	at    int64     // the committed offset last seen
	since time.Time // when it last moved, or the partition was caught up
}

// stalledUpstream is the partitions of the re-key stage (group upstream)
// with copies waiting whose commit has not moved for upstreamStallAfter (but
// not yet for maxHold); seen is where each was last seen.
func (s *xdrStage) stalledUpstream(ctx context.Context, upstream string, seen map[tp]upstreamProgress, maxHold time.Duration) ([]tp, error) {
	f := s.f
	lctx, cancel := context.WithTimeout(ctx, upstreamCheck)
	defer cancel()
	ends, err := f.m.adm.ListEndOffsets(lctx, f.spec.upstream...)
	if err != nil {
		return nil, err
	}
	committed, err := f.m.committed(lctx, upstream, partsOf(ends))
	if err != nil {
		return nil, err
	}
	var stalled []tp
	now := time.Now()
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			return
		}
		k := tp{e.Topic, e.Partition}
		at := int64(-1)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil {
			at = c.At
		}
		pr, ok := seen[k]
		switch {
		case !ok || at >= e.Offset || at != pr.at:
			seen[k] = upstreamProgress{at, now}
		case now.Sub(pr.since) > upstreamStallAfter && now.Sub(pr.since) < maxHold:
			stalled = append(stalled, k)
		}
	})
	return stalled, nil
}

// Upstream rebalances. When the re-key stage's consumer group rebalances
// (a node joins or leaves, a feed changes), partitions that move are not
// read for a moment: from the old owner's revocation until the new owner
// fetches. Every node's reader of that group goes through the rebalance,
// so each node's correlating stage holds its clock from the end of its own
// reader's group session (revocation) until upstreamSettle after its next
// assignment, when the others have started fetching what they were given.
const upstreamSettle = time.Second

// upstreamRebalance tells the correlating stages whose re-key stage is the
// feed named stage1 that its group is rebalancing (settled false: from its
// revocation) or was just assigned partitions (settled true).
func (m *Manager) upstreamRebalance(stage1 string, settled bool) {
	m.rmu.Lock()
	clocks := slices.Collect(maps.Keys(m.clocks[stage1]))
	m.rmu.Unlock()
	for _, c := range clocks {
		if !settled {
			// A reader that stops after a revocation is never assigned
			// again: the hold does not outlast two session timeouts.
			if c.hold(holdRebalance) {
				time.AfterFunc(2*m.cfg.SessionTimeout, func() { c.release(holdRebalance) })
			}
			continue
		}
		time.AfterFunc(upstreamSettle, func() { c.release(holdRebalance) })
	}
}

// watchRebalances has the manager tell c of the rebalances of the re-key
// stage named stage1, until the returned function is called.
func (m *Manager) watchRebalances(stage1 string, c *pausingClock) func() {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if m.clocks[stage1] == nil {
		m.clocks[stage1] = map[*pausingClock]bool{}
	}
	m.clocks[stage1][c] = true
	return func() {
		m.rmu.Lock()
		defer m.rmu.Unlock()
		delete(m.clocks[stage1], c)
		c.release(holdRebalance)
	}
}
