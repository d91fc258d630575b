package store

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/signalbox/signalbox/internal/platform/store/callseg"
)

// InsertCalls writes calls as one segment per callseg.MaxRecords (see package callseg).
// Encoding happens before the transaction, so the database is held only for
// the row inserts.
func (s *sqlStore) InsertCalls(ctx context.Context, calls []CallRecord) error {
	if len(calls) == 0 {
		return nil
	}
	var segs []callseg.Segment
	for rest := calls; len(rest) > 0; {
		n := callseg.Fit(rest)
		segs = append(segs, callseg.Encode(rest[:n], nil))
		rest = rest[n:]
	}
	err := s.write(ctx, false, func(t tx) error {
		for _, g := range segs {
			if _, err := t.exec(ctx, `INSERT INTO call_segments (min_time, max_time, count, decisions, filter, data)
				VALUES (?, ?, ?, ?, ?, ?)`, g.MinTime, g.MaxTime, g.Count, g.Decisions, g.Filter, g.Data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert %d calls: %w", len(calls), err)
	}
	return nil
}

// segPage is how many segments' metadata one search query reads; the
// records of those the metadata cannot rule out are read one segment at a
// time, so a search over many small segments (a quiet day) costs one query
// per page, and one over large ones reads only the blobs it decodes.
const segPage = 256

// SearchCalls walks segments newest first (by their latest record, then
// ID), skipping those the query's time range, decision or number rules out,
// and stops once no older segment can hold a record newer than the limit-th
// match so far.
func (s *sqlStore) SearchCalls(ctx context.Context, q CallQuery) ([]CallRecord, error) {
	limit := q.Limit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("search calls: limit %d: must not be negative", limit)
	case limit == 0:
		limit = DefaultCallQueryLimit
	case limit > MaxCallQueryLimit:
		limit = MaxCallQueryLimit
	}
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixMicro()
	}
	var wantDecision int64
	if q.Decision != "" {
		wantDecision = callseg.DecisionBit(q.Decision)
	}
	match := func(c *CallRecord) bool {
		t := c.Time.UnixMicro()
		return t >= since && t < until &&
			(q.Number == "" || c.Calling == q.Number || c.Called == q.Number ||
				c.TransformedCalling == q.Number || c.TransformedCalled == q.Number) &&
			(q.Decision == "" || c.Decision == q.Decision) &&
			(q.Policy == "" || c.Policy == q.Policy)
	}
	out := []CallRecord{}
	sortTrim := func() {
		sort.Slice(out, func(i, j int) bool { return callseg.Newer(&out[i], &out[j]) })
		if len(out) > limit {
			clear(out[limit:])
			out = out[:limit]
		}
	}
	type segMeta struct {
		id, maxT, decisions int64
		filter              []byte
	}
	page := make([]segMeta, 0, segPage)
	// Keyset pagination on (max_time, id), descending.
	afterMax, afterID := int64(math.MaxInt64), int64(math.MaxInt64)
	filterCol := "NULL" // the filter is read only when a number is searched
	if q.Number != "" {
		filterCol = "filter"
	}
	for {
		page = page[:0]
		rs, err := s.b.query(ctx, `SELECT id, max_time, decisions, `+filterCol+` FROM call_segments
			WHERE max_time >= ? AND min_time < ? AND (max_time < ? OR (max_time = ? AND id < ?))
			ORDER BY max_time DESC, id DESC LIMIT ?`, since, until, afterMax, afterMax, afterID, segPage)
		if err != nil {
			return nil, fmt.Errorf("search calls: %w", err)
		}
		for rs.Next() {
			var m segMeta
			if err := rs.Scan(&m.id, &m.maxT, &m.decisions, &m.filter); err != nil {
				rs.Close()
				return nil, fmt.Errorf("search calls: %w", err)
			}
			page = append(page, m)
		}
		err = rs.Err()
		rs.Close()
		if err != nil {
			return nil, fmt.Errorf("search calls: %w", err)
		}
		done := len(page) < segPage
		for _, m := range page {
			afterMax, afterID = m.maxT, m.id
			if len(out) >= limit && m.maxT < out[limit-1].Time.UnixMicro() {
				done = true // every later segment is older than the limit-th match
				break
			}
			if wantDecision != 0 && m.decisions&wantDecision == 0 {
				continue
			}
			if q.Number != "" && !(callseg.Bloom{Bits: m.filter}).MayContain(q.Number) {
				continue
			}
			var data []byte
			err := s.b.queryRow(ctx, `SELECT data FROM call_segments WHERE id = ?`, m.id).Scan(&data)
			if isNoRows(err) {
				continue // pruned meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("search calls: %w", err)
			}
			err = callseg.Decode(m.id, data, func(_ int64, c CallRecord) bool {
				if match(&c) {
					out = append(out, c)
				}
				return true
			})
			if err != nil {
				return nil, fmt.Errorf("search calls: %w", err)
			}
			if len(out) >= limit {
				sortTrim()
			}
		}
		if done {
			break
		}
	}
	sortTrim()
	return out, nil
}

// PruneCalls deletes records older than before (if set), then the oldest
// beyond the newest maxRows (if maxRows > 0). Whole segments go with one
// DELETE; a segment the cut falls inside is rewritten without the records
// it drops, keeping the others' IDs. The row limit takes segments in the
// order of their newest record, so with several nodes writing overlapping
// time ranges it is exact per segment, not per record across segments.
func (s *sqlStore) PruneCalls(ctx context.Context, before time.Time, maxRows int64) (int64, error) {
	var total int64
	err := s.write(ctx, false, func(t tx) error {
		if !before.IsZero() {
			cut := before.UnixMicro()
			var n int64
			if err := t.queryRow(ctx, `SELECT COALESCE(SUM(count), 0) FROM call_segments WHERE max_time < ?`, cut).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				if _, err := t.exec(ctx, `DELETE FROM call_segments WHERE max_time < ?`, cut); err != nil {
					return err
				}
				total += n
			}
			// Segments the cut falls inside keep their newer records.
			segs, err := readSegments(ctx, t, `SELECT id, data FROM call_segments WHERE min_time < ? AND max_time >= ?`, cut, cut)
			if err != nil {
				return err
			}
			for _, g := range segs {
				n, err := rewriteSegment(ctx, t, g, func(c *CallRecord) bool { return c.Time.UnixMicro() >= cut })
				if err != nil {
					return err
				}
				total += n
			}
		}
		if maxRows <= 0 {
			return nil
		}
		var kept int64
		if err := t.queryRow(ctx, `SELECT COALESCE(SUM(count), 0) FROM call_segments`).Scan(&kept); err != nil {
			return err
		}
		excess := kept - maxRows
		if excess <= 0 {
			return nil
		}
		// Oldest segments first: whole ones while they fit in the excess,
		// then trim the oldest records of the next.
		lastMax, lastID := int64(math.MinInt64), int64(math.MinInt64)
		var partID int64
		for excess > 0 && partID == 0 {
			rs, err := t.query(ctx, `SELECT id, max_time, count FROM call_segments
				WHERE max_time > ? OR (max_time = ? AND id > ?) ORDER BY max_time, id LIMIT 1000`, lastMax, lastMax, lastID)
			if err != nil {
				return err
			}
			n := 0
			for rs.Next() {
				var id, maxT, count int64
				if err := rs.Scan(&id, &maxT, &count); err != nil {
					rs.Close()
					return err
				}
				n++
				if count > excess {
					partID = id
					break
				}
				lastMax, lastID, excess = maxT, id, excess-count
				total += count
				if excess == 0 {
					break
				}
			}
			err = rs.Err()
			rs.Close()
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
		}
		if lastID != math.MinInt64 {
			if _, err := t.exec(ctx, `DELETE FROM call_segments WHERE max_time < ? OR (max_time = ? AND id <= ?)`,
				lastMax, lastMax, lastID); err != nil {
				return err
			}
		}
		if partID != 0 && excess > 0 {
			segs, err := readSegments(ctx, t, `SELECT id, data FROM call_segments WHERE id = ?`, partID)
			if err != nil {
				return err
			}
			for _, g := range segs {
				keep, err := dropOldest(g, excess)
				if err != nil {
					return err
				}
				n, err := rewriteSegment(ctx, t, g, keep)
				if err != nil {
					return err
				}
				total += n
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune calls: %w", err)
	}
	return total, nil
}

// storedSegment is a call_segments row's id and records.
type storedSegment struct {
	id   int64
	data []byte
}

// readSegments reads the (id, data) rows sel selects.
func readSegments(ctx context.Context, t tx, sel string, args ...any) ([]storedSegment, error) {
	rs, err := t.query(ctx, sel, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var segs []storedSegment
	for rs.Next() {
		var g storedSegment
		if err := rs.Scan(&g.id, &g.data); err != nil {
			return nil, err
		}
		segs = append(segs, g)
	}
	return segs, rs.Err()
}

// dropOldest returns a keep function for a segment that drops its n oldest
// records (by time, then ID).
func dropOldest(g storedSegment, n int64) (func(*CallRecord) bool, error) {
	var all []CallRecord
	if err := callseg.Decode(g.id, g.data, func(_ int64, c CallRecord) bool {
		all = append(all, CallRecord{ID: c.ID, Time: c.Time})
		return true
	}); err != nil {
		return nil, err
	}
	if n >= int64(len(all)) {
		return func(*CallRecord) bool { return false }, nil
	}
	sort.Slice(all, func(i, j int) bool { return callseg.Newer(&all[j], &all[i]) }) // oldest first
	cut := all[n-1]
	return func(c *CallRecord) bool { return callseg.Newer(c, &cut) }, nil
}

// rewriteSegment stores g with only the records keep accepts (deleting it
// if none remain) and returns how many records it dropped.
func rewriteSegment(ctx context.Context, t tx, g storedSegment, keep func(*CallRecord) bool) (int64, error) {
	ng, n, err := callseg.Trim(g.id, g.data, keep)
	if err != nil || n == 0 {
		return 0, err
	}
	if ng.Count == 0 {
		_, err = t.exec(ctx, `DELETE FROM call_segments WHERE id = ?`, g.id)
	} else {
		_, err = t.exec(ctx, `UPDATE call_segments SET min_time = ?, max_time = ?, count = ?, decisions = ?, filter = ?, data = ?
			WHERE id = ?`, ng.MinTime, ng.MaxTime, ng.Count, ng.Decisions, ng.Filter, ng.Data, g.id)
	}
	if err != nil {
		return 0, err
	}
	return int64(n), nil
}
