package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

const ruleCols = `id, policy_id, priority, enabled, match_json, action, schedule, expires_at, description, tags, hits, last_hit_at, created_at, updated_at, src_hash`

var ruleInsertCols = []string{"policy_id", "priority", "enabled", "match_json", "action", "schedule", "expires_at", "description", "tags", "hits", "last_hit_at", "created_at", "updated_at", "src_hash"}

// ruleScanner reuses its buffers across rows: LoadPolicies scans 100k rules.
type ruleScanner struct {
	codec                         ruleCodec
	match, action, schedule, tags []byte
	expires, lastHit, srcHash     sql.NullInt64
	created, updated              int64
}

func (sc *ruleScanner) scan(r row) (callpolicy.Rule, error) {
	var x callpolicy.Rule
	err := sc.scanInto(r, &x)
	return x, err
}

// scanInto scans into x in place: scanning into a local that Scan's
// pointers make escape cost LoadPolicies a heap Rule per row.
func (sc *ruleScanner) scanInto(r row, x *callpolicy.Rule) error {
	if err := r.Scan(&x.ID, &x.PolicyID, &x.Priority, &x.Enabled, &sc.match, &sc.action, &sc.schedule,
		&sc.expires, &x.Description, &sc.tags, &x.Hits, &sc.lastHit, &sc.created, &sc.updated, &sc.srcHash); err != nil {
		return err
	}
	x.SrcHash = uint64(sc.srcHash.Int64) // 0 when NULL
	if err := decodeMatch(sc.match, &x.Match); err != nil {
		return fmt.Errorf("rule %d: match: %w", x.ID, err)
	}
	if err := sc.codec.decodeAction(sc.action, &x.Action); err != nil {
		return fmt.Errorf("rule %d: action: %w", x.ID, err)
	}
	if len(sc.schedule) > 0 {
		var err error
		if x.Schedule, err = sc.codec.decodeSchedule(sc.schedule); err != nil {
			return fmt.Errorf("rule %d: schedule: %w", x.ID, err)
		}
	}
	if len(sc.tags) > 0 {
		if err := json.Unmarshal(sc.tags, &x.Tags); err != nil {
			return fmt.Errorf("rule %d: tags: %w", x.ID, err)
		}
	}
	x.ExpiresAt, x.LastHitAt = ptrUS(sc.expires), ptrUS(sc.lastHit)
	x.CreatedAt, x.UpdatedAt = fromUS(sc.created), fromUS(sc.updated)
	return nil
}

// encodedRule holds a rule's JSON columns, encoded before the transaction
// starts so the write lock is held only for the INSERTs.
type encodedRule struct {
	match, action string
	schedule      any
	tags          any
}

func encodeRule(r *callpolicy.Rule) (encodedRule, error) {
	var c ruleCodec
	return c.encode(r)
}

func (s *sqlStore) ListRules(ctx context.Context, policyID string) ([]callpolicy.Rule, error) {
	var out []callpolicy.Rule
	err := s.read(ctx, func(t tx) error {
		var err error
		var n int
		if err := t.queryRow(ctx, `SELECT count(*) FROM rules WHERE policy_id = ?`, policyID).Scan(&n); err != nil {
			return err
		}
		out, err = queryRules(ctx, t, n, `SELECT `+ruleCols+` FROM rules WHERE policy_id = ? ORDER BY priority, id`, policyID)
		if err == nil && len(out) == 0 {
			err = policyExists(ctx, t, policyID)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("list rules of %q: %w", policyID, err)
	}
	return out, err
}

// queryRules reads rules; sizeHint preallocates (a Rule is ~250 bytes, and
// growing a 100k slice by doubling costs more than counting first).
func queryRules(ctx context.Context, t tx, sizeHint int, q string, args ...any) ([]callpolicy.Rule, error) {
	rs, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := make([]callpolicy.Rule, 0, sizeHint)
	var sc ruleScanner
	for rs.Next() {
		out = append(out, callpolicy.Rule{})
		if err := sc.scanInto(rs, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, rs.Err()
}

func (s *sqlStore) GetRule(ctx context.Context, id int64) (callpolicy.Rule, error) {
	var sc ruleScanner
	r, err := sc.scan(s.b.queryRow(ctx, `SELECT `+ruleCols+` FROM rules WHERE id = ?`, id))
	if isNoRows(err) {
		return r, fmt.Errorf("rule %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("get rule %d: %w", id, err)
	}
	return r, nil
}

func (s *sqlStore) CreateRule(ctx context.Context, r *callpolicy.Rule) error {
	e, err := encodeRule(r)
	if err != nil {
		return fmt.Errorf("rule: %w", err)
	}
	ts := now()
	var id int64
	err = s.write(ctx, true, func(t tx) error {
		if err := policyExists(ctx, t, r.PolicyID); err != nil {
			return err
		}
		return t.queryRow(ctx, `INSERT INTO rules (`+strings.Join(ruleInsertCols, ", ")+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?, ?, NULL) RETURNING id`,
			r.PolicyID, r.Priority, r.Enabled, e.match, e.action, e.schedule, nullUS(r.ExpiresAt),
			r.Description, e.tags, ts.UnixMicro(), ts.UnixMicro()).Scan(&id)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("create rule in %q: %w", r.PolicyID, err)
	}
	r.ID, r.Hits, r.LastHitAt, r.CreatedAt, r.UpdatedAt = id, 0, nil, ts, ts
	return nil
}

// UpdateRule replaces a rule's definition; its policy, hits and creation
// time stay. A PolicyID other than the rule's own is refused.
func (s *sqlStore) UpdateRule(ctx context.Context, r *callpolicy.Rule) error {
	e, err := encodeRule(r)
	if err != nil {
		return fmt.Errorf("rule %d: %w", r.ID, err)
	}
	ts := now()
	var policy string
	var hits, created int64
	var lastHit sql.NullInt64
	err = s.write(ctx, true, func(t tx) error {
		err := t.queryRow(ctx, `UPDATE rules SET priority = ?, enabled = ?, match_json = ?, action = ?, schedule = ?,
			expires_at = ?, description = ?, tags = ?, updated_at = ?, src_hash = NULL
			WHERE id = ? AND (? = '' OR policy_id = ?) RETURNING policy_id, hits, last_hit_at, created_at`,
			r.Priority, r.Enabled, e.match, e.action, e.schedule, nullUS(r.ExpiresAt), r.Description, e.tags,
			ts.UnixMicro(), r.ID, r.PolicyID, r.PolicyID).Scan(&policy, &hits, &lastHit, &created)
		if isNoRows(err) {
			if r.PolicyID != "" {
				return fmt.Errorf("rule %d in policy %q: %w", r.ID, r.PolicyID, ErrNotFound)
			}
			return fmt.Errorf("rule %d: %w", r.ID, ErrNotFound)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("update rule %d: %w", r.ID, err)
	}
	r.PolicyID, r.Hits, r.LastHitAt, r.CreatedAt, r.UpdatedAt = policy, hits, ptrUS(lastHit), fromUS(created), ts
	return nil
}

func (s *sqlStore) DeleteRule(ctx context.Context, id int64) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM rules WHERE id = ?`, id)
		if err == nil && n == 0 {
			err = fmt.Errorf("rule %d: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete rule %d: %w", id, err)
	}
	return err
}

// ReplaceRules deletes a policy's rules and bulk-inserts the new ones in one
// transaction; the new rules get fresh ids and zero hits.
func (s *sqlStore) ReplaceRules(ctx context.Context, policyID string, rules []callpolicy.Rule, idsSet func()) error {
	ins := newRuleInserts(policyID, rules, idsSet)
	row, setIDs := ins.row, ins.setIDs
	if len(rules) == 0 {
		setIDs(nil)
	}
	err := s.write(ctx, true, func(t tx) error {
		if err := policyExists(ctx, t, policyID); err != nil {
			return err
		}
		rebuild, err := s.dropRuleIndexForBulk(ctx, t, policyID, len(rules))
		if err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM rules WHERE policy_id = ?`, policyID); err != nil {
			return err
		}
		if _, err = t.insertIDs(ctx, "rules", ruleInsertCols, len(rules), row, setIDs); err != nil {
			return err
		}
		if ins.encErr != nil {
			return ins.encErr
		}
		if rebuild {
			_, err = t.exec(ctx, ruleIndexDDL)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("replace rules of %q: %w", policyID, err)
	}
	return err
}

// ruleInserts writes new rules of a policy. The row values are encoded and
// boxed one row at a time as the rows are written, and the values shared
// by every row are boxed once: boxing all 1.3 M values of a 100k load up
// front was ~45 MB of garbage on the reload path, and encoding every
// rule's JSON columns first kept ~15 MB more alive through the insert. An
// encoding error (there is none for a validated rule) is kept in encErr
// for the transaction to roll back on.
type ruleInserts struct {
	row    func(i int) []any
	setIDs func(ids []int64)
	encErr error
}

func newRuleInserts(policyID string, rules []callpolicy.Rule, idsSet func()) *ruleInserts {
	ins := &ruleInserts{}
	var ts, pid any = now().UnixMicro(), policyID
	var codec ruleCodec
	v := make([]any, len(ruleInsertCols))
	ins.row = func(i int) []any {
		r := &rules[i]
		e, err := codec.encode(r)
		if err != nil && ins.encErr == nil {
			ins.encErr = fmt.Errorf("rule #%d: %w", i, err)
		}
		v[0], v[1], v[2], v[3], v[4], v[5] = pid, r.Priority, r.Enabled, e.match, e.action, e.schedule
		v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13] = nullUS(r.ExpiresAt), r.Description, e.tags, int64(0), nil, ts, ts, srcHash(r.SrcHash)
		return v
	}
	// The caller's rules become the stored ones as soon as their ids are
	// drawn, so it can compile them (without reading 100,000 rows back)
	// while the rows are written.
	created := fromUS(ts.(int64))
	ins.setIDs = func(ids []int64) {
		for i := range rules {
			r := &rules[i]
			r.ID, r.PolicyID, r.Hits, r.LastHitAt, r.CreatedAt, r.UpdatedAt = ids[i], policyID, 0, nil, created, created
		}
		if idsSet != nil {
			idsSet()
		}
	}
	return ins
}

// srcHash is a rule's source hash as stored: NULL for none.
func srcHash(h uint64) any {
	if h == 0 {
		return nil
	}
	return int64(h)
}

// ChangeRules applies an incremental replacement of a policy's rules in one
// transaction: the rules removed are deleted, those added inserted with
// fresh ids (set, like ReplaceRules, before the rows are written, when
// idsSet is called). It is refused with ErrConflict, changing nothing, if
// the configuration version is no longer expect (someone changed the
// configuration since the caller diffed against it) or a removed rule is
// not one of the policy's.
func (s *sqlStore) ChangeRules(ctx context.Context, policyID string, expect int64, removed []int64, added []callpolicy.Rule, idsSet func()) error {
	ins := newRuleInserts(policyID, added, idsSet)
	err := s.write(ctx, true, func(t tx) error {
		var v int64
		if err := t.queryRow(ctx, `SELECT version FROM config_version WHERE id = 1`).Scan(&v); err != nil {
			return err
		}
		if v != expect {
			return fmt.Errorf("configuration changed meanwhile (version %d, not %d): %w", v, expect, ErrConflict)
		}
		// In statements of up to 500 ids: a statement per row cost more
		// than the rest of a 1,000-rule change.
		for i := 0; i < len(removed); i += 500 {
			batch := removed[i:min(i+500, len(removed))]
			args := make([]any, 0, len(batch))
			for _, id := range batch {
				args = append(args, id)
			}
			// By id alone, the policy checked on what was deleted: with
			// "policy_id = ?" in the WHERE, SQLite (no statistics) walks
			// the policy's index instead of the 500 ids.
			q := `DELETE FROM rules WHERE id IN (?` + strings.Repeat(", ?", len(batch)-1) + `) RETURNING policy_id`
			rs, err := t.query(ctx, q, args...)
			if err != nil {
				return err
			}
			n := 0
			for rs.Next() {
				var p string
				if err := rs.Scan(&p); err != nil {
					rs.Close()
					return err
				}
				if p == policyID {
					n++
				}
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return err
			}
			if n != len(batch) {
				return fmt.Errorf("%d of the rules to remove are not rules of %q: %w", len(batch)-n, policyID, ErrConflict)
			}
			runtime.Gosched()
		}
		if len(added) == 0 {
			ins.setIDs(nil)
			return nil
		}
		if _, err := t.insertIDs(ctx, "rules", ruleInsertCols, len(added), ins.row, ins.setIDs); err != nil {
			return err
		}
		return ins.encErr
	})
	if err != nil && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("change rules of %q: %w", policyID, err)
	}
	return err
}

// ruleIndexDDL recreates the rules index of the migrations.
const ruleIndexDDL = `CREATE INDEX rules_policy_order ON rules (policy_id, priority, id)`

// dropRuleIndexForBulk drops the rules index inside the transaction before
// a large replacement of policyID's rules on SQLite, when the rows about to
// be inserted outnumber the other policies' rules, so the caller builds it
// once afterwards; the policy's old rows are then deleted by a table scan
// without index upkeep too. 100,000 rules: 1.0-1.3 s with the index
// maintained row by row, 0.6-0.7 s without plus 0.09 s to build it.
// Readers keep the old index until the commit; PostgreSQL's COPY path is
// left as it is.
func (s *sqlStore) dropRuleIndexForBulk(ctx context.Context, t tx, policyID string, inserting int) (bool, error) {
	if s.b.name() != "sqlite" || inserting < 10_000 {
		return false, nil
	}
	var others int64
	if err := t.queryRow(ctx, `SELECT count(*) - (SELECT count(*) FROM rules WHERE policy_id = ?) FROM rules`, policyID).Scan(&others); err != nil {
		return false, err
	}
	if others >= int64(inserting) {
		return false, nil
	}
	_, err := t.exec(ctx, `DROP INDEX rules_policy_order`)
	return err == nil, err
}

// AddRuleHits is statistics, not configuration: no version bump. Hits of
// rules deleted meanwhile are dropped.
func (s *sqlStore) AddRuleHits(ctx context.Context, hits map[int64]RuleHit) error {
	if len(hits) == 0 {
		return nil
	}
	err := s.write(ctx, false, func(t tx) error {
		for id, h := range hits {
			var err error
			if h.Last.IsZero() {
				_, err = t.exec(ctx, `UPDATE rules SET hits = hits + ? WHERE id = ?`, h.Count, id)
			} else {
				last := h.Last.UnixMicro()
				_, err = t.exec(ctx, `UPDATE rules SET hits = hits + ?,
					last_hit_at = CASE WHEN last_hit_at IS NULL OR last_hit_at < ? THEN ? ELSE last_hit_at END
					WHERE id = ?`, h.Count, last, last, id)
			}
			if err != nil {
				return fmt.Errorf("rule %d: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add rule hits: %w", err)
	}
	return nil
}
