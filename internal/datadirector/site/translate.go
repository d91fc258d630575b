package site

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

// Translating feed positions between a site's topic and the peer's mirrored
// copy of it: through the mirror's offset maps where they know, else by
// reading the copies' origin offsets from the peer's Kafka.

// PeerOffset translates a position in this site's topic (the next offset to
// read of topic/part) to the position in the peer's mirrored topic. Where
// the offset map does not know it (a restart seeds the map from the peer's
// last copies; another node of this site mirrors the partition), the
// peer's topic is searched for it.
func (m *Mirror) PeerOffset(ctx context.Context, topic string, part int32, next int64) (int64, bool) {
	if d, ok := m.offsetMap(topic, part).destOf(next); ok {
		return d, true
	}
	d, err := m.search(ctx, MirroredTopic(m.cfg.Site, topic), part, func(origin int64) bool { return origin >= next })
	if err != nil {
		m.log.Warn("site mirror: find a position in the peer's topic", "topic", topic, "partition", part, "offset", next, "err", err)
		return 0, false
	}
	return d, true
}

// LocalOffset translates a position in the peer's mirrored copy of this
// site's topic/part to the position in this site's topic; where the offset
// map does not know it, the copy there is read from the peer's Kafka.
func (m *Mirror) LocalOffset(ctx context.Context, topic string, part int32, next int64) (int64, bool) {
	if o, ok := m.offsetMap(topic, part).originOf(next); ok {
		return o, true
	}
	o, err := m.originAfter(ctx, topic, part, next)
	if err != nil {
		m.log.Warn("site mirror: read a mirrored copy's origin", "topic", topic, "partition", part, "offset", next, "err", err)
		return 0, false
	}
	return o, true
}

// bounds are the start and end offsets of the peer's topic/part.
func (m *Mirror) bounds(ctx context.Context, topic string, part int32) (start, end int64, err error) {
	return partitionBounds(ctx, m.cfg.Remote, topic, part)
}

// PeerPosition translates, as PeerOffset, a feed's final position in this
// site's topic/part (the next offset to read) to the peer's mirrored copy,
// and says whether the translation is exact: whether every copy of the
// partition below next is mirrored already. Until it is, a reader of the
// peer's copy positioned there would read again, as the mirror catches up,
// copies this site delivered; the peer waits instead (a hand-back after
// the peer was down and this site's mirror has a backlog to send).
func (m *Mirror) PeerPosition(ctx context.Context, topic string, part int32, next int64) (dest int64, exact bool, err error) {
	rt := MirroredTopic(m.cfg.Site, topic)
	start, end, err := m.bounds(ctx, rt, part)
	if err != nil {
		return 0, false, err
	}
	last := int64(-1) // the origin offset of the last copy mirrored
	if end > start {
		if last, err = m.originAt(ctx, rt, part, end-1); err != nil {
			return 0, false, err
		}
	}
	if next <= last+1 {
		d, ok := m.PeerOffset(ctx, topic, part, next)
		if !ok {
			return 0, false, fmt.Errorf("%s/%d offset %d: not found in the peer's copy", topic, part, next)
		}
		return d, true, nil
	}
	// Between the last copy mirrored and next: copies still to mirror, or
	// none (a transaction's control records, aborted copies).
	toCome, err := m.copyBetween(ctx, topic, part, last+1, next)
	if err != nil {
		return 0, false, err
	}
	return end, !toCome, nil
}

// copyBetween reports whether this site's topic/part holds a copy (not a
// control record, not an aborted copy) at an offset in [from, before).
func (m *Mirror) copyBetween(ctx context.Context, topic string, part int32, from, before int64) (bool, error) {
	start, end, err := partitionBounds(ctx, m.cfg.Local, topic, part)
	if err != nil {
		return false, err
	}
	from = max(from, start)
	if from >= min(before, end) {
		return false, nil
	}
	rd, err := m.cfg.Local.NewClient(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(from)}}))
	if err != nil {
		return false, err
	}
	defer rd.Close()
	// Only control records (or aborted copies) below before: the fetch
	// returns nothing until later copies come. Half a second says so.
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	for {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return false, nil
		}
		if err := fs.Err0(); err != nil {
			return false, err
		}
		first := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			if first < 0 && r.Offset >= from {
				first = r.Offset
			}
		})
		if first >= 0 {
			return first < before, nil
		}
	}
}

// partitionBounds are the start and end offsets of topic/part in the Kafka
// of cfg.
func partitionBounds(ctx context.Context, cfg broker.ClientConfig, topic string, part int32) (start, end int64, err error) {
	cl, err := cfg.NewClient()
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for i, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		lo, err := list(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return 0, 0, err
		}
		o, _ := lo.Lookup(topic, part)
		if i == 0 {
			start = o.Offset
		} else {
			end = o.Offset
		}
	}
	return start, end, nil
}

// originAfter is where, in this site's topic/part, a reader positioned at
// next in the peer's mirrored copy of it goes on: the origin of the copy at
// next, or past the end, after the last copy's.
func (m *Mirror) originAfter(ctx context.Context, topic string, part int32, next int64) (int64, error) {
	rt := MirroredTopic(m.cfg.Site, topic)
	start, end, err := m.bounds(ctx, rt, part)
	if err != nil {
		return 0, err
	}
	if end <= start {
		// Nothing mirrored (or nothing left): a reader of the peer's
		// copy has read none of the origin partition, and goes on from
		// its start, where the mirror starts too (resume).
		start, _, err := partitionBounds(ctx, m.cfg.Local, topic, part)
		return start, err
	}
	if next >= end {
		o, err := m.originAt(ctx, rt, part, end-1)
		return o + 1, err
	}
	return m.originAt(ctx, rt, part, max(next, start))
}

// search is the first offset of the peer's topic/part whose copy's origin
// satisfies ok (monotone: false, then true), or the end if none does.
func (m *Mirror) search(ctx context.Context, topic string, part int32, ok func(origin int64) bool) (int64, error) {
	lo, hi, err := m.bounds(ctx, topic, part)
	if err != nil {
		return 0, err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		o, err := m.originAt(ctx, topic, part, mid)
		if err != nil {
			return 0, err
		}
		if ok(o) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// originAt reads the origin offset of the copy at offset at (or the first
// after it) of the peer's topic/part.
func (m *Mirror) originAt(ctx context.Context, topic string, part int32, at int64) (int64, error) {
	rd, err := m.cfg.Remote.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(at)}}))
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var r *kgo.Record
		fs.EachRecord(func(x *kgo.Record) {
			if r == nil && x.Offset >= at {
				r = x
			}
		})
		if r != nil {
			o, ok := originOffset(r)
			if !ok {
				return 0, fmt.Errorf("%s/%d offset %d has no %s header", topic, part, r.Offset, HeaderOrigin)
			}
			return o, nil
		}
	}
}
