package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/signalbox/signalbox/internal/callpolicy"
	"github.com/signalbox/signalbox/internal/store/callseg"
)

// sqlStore implements Store over either backend with shared SQL.
type sqlStore struct {
	b    backend
	log  *slog.Logger
	once sync.Once
	done chan struct{} // closed by Close; stops change listeners
}

// MaxCallQueryLimit caps CallQuery.Limit; DefaultCallQueryLimit applies when
// it is zero.
const (
	DefaultCallQueryLimit = 100
	MaxCallQueryLimit     = 10000
)

func (s *sqlStore) Backend() string                { return s.b.name() }
func (s *sqlStore) Ping(ctx context.Context) error { return s.b.ping(ctx) }

func (s *sqlStore) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.b.close()
	})
	return err
}

func (s *sqlStore) Changes(ctx context.Context) <-chan struct{} { return s.b.changes(ctx, s.done) }

func (s *sqlStore) ConfigVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.b.queryRow(ctx, `SELECT version FROM config_version WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("config version: %w", err)
	}
	return v, nil
}

// write runs fn in a write transaction. A configuration change bumps the
// version (and notifies other nodes) in the same transaction, so a reader
// that sees the new version sees the change.
func (s *sqlStore) write(ctx context.Context, configChange bool, fn func(t tx) error) (err error) {
	t, err := s.b.begin(ctx, false)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = t.rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if configChange {
		if _, err := t.exec(ctx, `UPDATE config_version SET version = version + 1 WHERE id = 1`); err != nil {
			return fmt.Errorf("bump config version: %w", err)
		}
		if err := t.notifyChange(ctx); err != nil {
			return fmt.Errorf("notify change: %w", err)
		}
	}
	if err := t.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *sqlStore) read(ctx context.Context, fn func(t tx) error) error {
	t, err := s.b.begin(ctx, true)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer t.rollback(context.WithoutCancel(ctx))
	return fn(t)
}

func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func fromUS(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullUS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func ptrUS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromUS(v.Int64)
	return &t
}

func policyExists(ctx context.Context, q interface {
	queryRow(ctx context.Context, sql string, args ...any) row
}, id string) error {
	var one int
	err := q.queryRow(ctx, `SELECT 1 FROM policies WHERE id = ?`, id).Scan(&one)
	if isNoRows(err) {
		return fmt.Errorf("policy %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("policy %q: %w", id, err)
	}
	return nil
}

// ---- policies ----

const policyCols = `id, name, description, default_action, rate_limit, created_at, updated_at`

func scanPolicy(r row) (callpolicy.Policy, error) {
	var p callpolicy.Policy
	var action, limit []byte
	var created, updated int64
	if err := r.Scan(&p.ID, &p.Name, &p.Description, &action, &limit, &created, &updated); err != nil {
		return p, err
	}
	if err := json.Unmarshal(action, &p.DefaultAction); err != nil {
		return p, fmt.Errorf("policy %q: default_action: %w", p.ID, err)
	}
	if len(limit) > 0 {
		p.RateLimit = new(callpolicy.RateLimit)
		if err := json.Unmarshal(limit, p.RateLimit); err != nil {
			return p, fmt.Errorf("policy %q: rate_limit: %w", p.ID, err)
		}
	}
	p.CreatedAt, p.UpdatedAt = fromUS(created), fromUS(updated)
	return p, nil
}

func encodePolicy(p *callpolicy.Policy) (action string, limit any, err error) {
	if p.ID == "" {
		return "", nil, errors.New("policy: empty id")
	}
	b, err := json.Marshal(p.DefaultAction)
	if err != nil {
		return "", nil, fmt.Errorf("policy %q: default_action: %w", p.ID, err)
	}
	if p.RateLimit != nil {
		l, err := json.Marshal(p.RateLimit)
		if err != nil {
			return "", nil, fmt.Errorf("policy %q: rate_limit: %w", p.ID, err)
		}
		limit = string(l)
	}
	return string(b), limit, nil
}

func (s *sqlStore) ListPolicies(ctx context.Context) ([]callpolicy.Policy, error) {
	rs, err := s.b.query(ctx, `SELECT `+policyCols+` FROM policies ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	defer rs.Close()
	out := []callpolicy.Policy{}
	for rs.Next() {
		p, err := scanPolicy(rs)
		if err != nil {
			return nil, fmt.Errorf("list policies: %w", err)
		}
		out = append(out, p)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

func (s *sqlStore) GetPolicy(ctx context.Context, id string) (callpolicy.Policy, error) {
	p, err := scanPolicy(s.b.queryRow(ctx, `SELECT `+policyCols+` FROM policies WHERE id = ?`, id))
	if isNoRows(err) {
		return p, fmt.Errorf("policy %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("get policy %q: %w", id, err)
	}
	return p, nil
}

func (s *sqlStore) CreatePolicy(ctx context.Context, p *callpolicy.Policy) error {
	action, limit, err := encodePolicy(p)
	if err != nil {
		return err
	}
	ts := now()
	err = s.write(ctx, true, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO policies (`+policyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.Name, p.Description, action, limit, ts.UnixMicro(), ts.UnixMicro())
		return err
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("policy %q: %w", p.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create policy %q: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = ts, ts
	return nil
}

func (s *sqlStore) UpdatePolicy(ctx context.Context, p *callpolicy.Policy) error {
	action, limit, err := encodePolicy(p)
	if err != nil {
		return err
	}
	ts := now()
	var created int64
	err = s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `UPDATE policies SET name = ?, description = ?, default_action = ?, rate_limit = ?, updated_at = ?
			WHERE id = ? RETURNING created_at`,
			p.Name, p.Description, action, limit, ts.UnixMicro(), p.ID).Scan(&created)
	})
	if isNoRows(err) {
		return fmt.Errorf("policy %q: %w", p.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update policy %q: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = fromUS(created), ts
	return nil
}

func (s *sqlStore) DeletePolicy(ctx context.Context, id string) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM policies WHERE id = ?`, id)
		if err == nil && n == 0 {
			err = fmt.Errorf("policy %q: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete policy %q: %w", id, err)
	}
	return err
}

// ---- rules ----

const ruleCols = `id, policy_id, priority, enabled, match_json, action, schedule, expires_at, description, tags, hits, last_hit_at, created_at, updated_at`

var ruleInsertCols = []string{"policy_id", "priority", "enabled", "match_json", "action", "schedule", "expires_at", "description", "tags", "hits", "last_hit_at", "created_at", "updated_at"}

// ruleScanner reuses its buffers across rows: LoadPolicies scans 100k rules.
type ruleScanner struct {
	codec                         ruleCodec
	match, action, schedule, tags []byte
	expires, lastHit              sql.NullInt64
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
		&sc.expires, &x.Description, &sc.tags, &x.Hits, &sc.lastHit, &sc.created, &sc.updated); err != nil {
		return err
	}
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
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?, ?) RETURNING id`,
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
			expires_at = ?, description = ?, tags = ?, updated_at = ?
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
	// The row values are encoded and boxed one row at a time as the rows
	// are written, and the values shared by every row are boxed once:
	// boxing all 1.3 M values of a 100k load up front was ~45 MB of garbage
	// on the reload path, and encoding every rule's JSON columns first kept
	// ~15 MB more alive through the insert. An encoding error (there is
	// none for a validated rule) rolls the transaction back.
	var ts, pid any = now().UnixMicro(), policyID
	var codec ruleCodec
	var encErr error
	v := make([]any, len(ruleInsertCols))
	row := func(i int) []any {
		r := &rules[i]
		e, err := codec.encode(r)
		if err != nil && encErr == nil {
			encErr = fmt.Errorf("rule #%d: %w", i, err)
		}
		v[0], v[1], v[2], v[3], v[4], v[5] = pid, r.Priority, r.Enabled, e.match, e.action, e.schedule
		v[6], v[7], v[8], v[9], v[10], v[11], v[12] = nullUS(r.ExpiresAt), r.Description, e.tags, int64(0), nil, ts, ts
		return v
	}
	// The caller's rules become the stored ones as soon as their ids are
	// drawn, so it can compile them (without reading 100,000 rows back)
	// while the rows are written.
	created := fromUS(ts.(int64))
	setIDs := func(ids []int64) {
		for i := range rules {
			r := &rules[i]
			r.ID, r.PolicyID, r.Hits, r.LastHitAt, r.CreatedAt, r.UpdatedAt = ids[i], policyID, 0, nil, created, created
		}
		if idsSet != nil {
			idsSet()
		}
	}
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
		if encErr != nil {
			return encErr
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

// ---- allow and block lists ----

const entryCols = `id, policy_id, list, calling, called, expires_at, note, created_at`

var entryInsertCols = []string{"policy_id", "list", "calling", "called", "expires_at", "note", "created_at"}

func scanEntry(r row) (callpolicy.ListEntry, error) {
	var e callpolicy.ListEntry
	var list string
	var expires sql.NullInt64
	var created int64
	if err := r.Scan(&e.ID, &e.PolicyID, &list, &e.Calling, &e.Called, &expires, &e.Note, &created); err != nil {
		return e, err
	}
	e.List, e.ExpiresAt, e.CreatedAt = callpolicy.ListKind(list), ptrUS(expires), fromUS(created)
	return e, nil
}

func checkList(list callpolicy.ListKind) error {
	if list != callpolicy.AllowList && list != callpolicy.BlockList {
		return fmt.Errorf("list %q: want %q or %q", list, callpolicy.AllowList, callpolicy.BlockList)
	}
	return nil
}

// ListEntries lists one list of a policy; an empty list kind lists both.
func (s *sqlStore) ListEntries(ctx context.Context, policyID string, list callpolicy.ListKind) ([]callpolicy.ListEntry, error) {
	if list != "" {
		if err := checkList(list); err != nil {
			return nil, err
		}
	}
	out := []callpolicy.ListEntry{}
	err := s.read(ctx, func(t tx) error {
		rs, err := t.query(ctx, `SELECT `+entryCols+` FROM list_entries
			WHERE policy_id = ? AND (? = '' OR list = ?) ORDER BY list, id`, policyID, string(list), string(list))
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			e, err := scanEntry(rs)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return policyExists(ctx, t, policyID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("list %s entries of %q: %w", list, policyID, err)
	}
	return out, err
}

func (s *sqlStore) AddEntries(ctx context.Context, policyID string, list callpolicy.ListKind, entries []callpolicy.ListEntry) error {
	if err := checkList(list); err != nil {
		return err
	}
	for i := range entries {
		if entries[i].Calling == "" {
			return fmt.Errorf("entry %d: calling is required", i)
		}
	}
	ts := now()
	var ids []int64
	err := s.write(ctx, true, func(t tx) error {
		if err := policyExists(ctx, t, policyID); err != nil {
			return err
		}
		var err error
		ids, err = t.insertIDs(ctx, "list_entries", entryInsertCols, len(entries), func(i int) []any {
			e := &entries[i]
			return []any{policyID, string(list), e.Calling, e.Called, nullUS(e.ExpiresAt), e.Note, ts.UnixMicro()}
		}, nil)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("add %s entries to %q: %w", list, policyID, err)
	}
	for i := range entries {
		entries[i].ID, entries[i].PolicyID, entries[i].List, entries[i].CreatedAt = ids[i], policyID, list, ts
	}
	return nil
}

func (s *sqlStore) DeleteEntry(ctx context.Context, policyID string, list callpolicy.ListKind, id int64) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM list_entries WHERE id = ? AND policy_id = ? AND list = ?`, id, policyID, string(list))
		if err == nil && n == 0 {
			err = fmt.Errorf("%s entry %d of policy %q: %w", list, id, policyID, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete entry %d: %w", id, err)
	}
	return err
}

// LoadPolicies reads everything in one read transaction (one snapshot), with
// one query per table rather than per policy.
func (s *sqlStore) LoadPolicies(ctx context.Context) ([]callpolicy.PolicyConfig, error) {
	var out []callpolicy.PolicyConfig
	err := s.read(ctx, func(t tx) error {
		rs, err := t.query(ctx, `SELECT `+policyCols+` FROM policies ORDER BY id`)
		if err != nil {
			return err
		}
		idx := map[string]int{}
		for rs.Next() {
			p, err := scanPolicy(rs)
			if err != nil {
				rs.Close()
				return err
			}
			idx[p.ID] = len(out)
			out = append(out, callpolicy.PolicyConfig{Policy: p, Rules: []callpolicy.Rule{}, Allow: []callpolicy.ListEntry{}, Block: []callpolicy.ListEntry{}})
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		var n int
		if err := t.queryRow(ctx, `SELECT count(*) FROM rules`).Scan(&n); err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		rules, err := queryRules(ctx, t, n, `SELECT `+ruleCols+` FROM rules ORDER BY policy_id, priority, id`)
		if err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		// Sub-slice the one big slice per policy: no per-policy copies.
		for i := 0; i < len(rules); {
			j := i
			for j < len(rules) && rules[j].PolicyID == rules[i].PolicyID {
				j++
			}
			if k, ok := idx[rules[i].PolicyID]; ok {
				out[k].Rules = rules[i:j:j]
			}
			i = j
		}
		rs, err = t.query(ctx, `SELECT `+entryCols+` FROM list_entries ORDER BY policy_id, list, id`)
		if err != nil {
			return fmt.Errorf("list entries: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			e, err := scanEntry(rs)
			if err != nil {
				return fmt.Errorf("list entries: %w", err)
			}
			k, ok := idx[e.PolicyID]
			if !ok {
				continue
			}
			if e.List == callpolicy.AllowList {
				out[k].Allow = append(out[k].Allow, e)
			} else {
				out[k].Block = append(out[k].Block, e)
			}
		}
		return rs.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return out, nil
}

// ---- call log ----

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

// ---- feeds ----

func scanFeed(r row) (FeedRecord, error) {
	var f FeedRecord
	var spec []byte
	var created, updated int64
	if err := r.Scan(&f.Name, &spec, &created, &updated); err != nil {
		return f, err
	}
	f.Spec = json.RawMessage(spec)
	f.CreatedAt, f.UpdatedAt = fromUS(created), fromUS(updated)
	return f, nil
}

func checkFeed(f *FeedRecord) error {
	if f.Name == "" {
		return errors.New("feed: empty name")
	}
	if !json.Valid(f.Spec) {
		return fmt.Errorf("feed %q: spec is not valid JSON", f.Name)
	}
	return nil
}

func (s *sqlStore) ListFeeds(ctx context.Context) ([]FeedRecord, error) {
	rs, err := s.b.query(ctx, `SELECT name, spec, created_at, updated_at FROM feeds ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list feeds: %w", err)
	}
	defer rs.Close()
	out := []FeedRecord{}
	for rs.Next() {
		f, err := scanFeed(rs)
		if err != nil {
			return nil, fmt.Errorf("list feeds: %w", err)
		}
		out = append(out, f)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list feeds: %w", err)
	}
	return out, nil
}

func (s *sqlStore) GetFeed(ctx context.Context, name string) (FeedRecord, error) {
	f, err := scanFeed(s.b.queryRow(ctx, `SELECT name, spec, created_at, updated_at FROM feeds WHERE name = ?`, name))
	if isNoRows(err) {
		return f, fmt.Errorf("feed %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("get feed %q: %w", name, err)
	}
	return f, nil
}

func (s *sqlStore) CreateFeed(ctx context.Context, f *FeedRecord) error {
	if err := checkFeed(f); err != nil {
		return err
	}
	ts := now()
	err := s.write(ctx, true, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO feeds (name, spec, created_at, updated_at) VALUES (?, ?, ?, ?)`,
			f.Name, string(f.Spec), ts.UnixMicro(), ts.UnixMicro())
		return err
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("feed %q: %w", f.Name, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create feed %q: %w", f.Name, err)
	}
	f.CreatedAt, f.UpdatedAt = ts, ts
	return nil
}

func (s *sqlStore) UpdateFeed(ctx context.Context, f *FeedRecord) error {
	if err := checkFeed(f); err != nil {
		return err
	}
	ts := now()
	var created int64
	err := s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `UPDATE feeds SET spec = ?, updated_at = ? WHERE name = ? RETURNING created_at`,
			string(f.Spec), ts.UnixMicro(), f.Name).Scan(&created)
	})
	if isNoRows(err) {
		return fmt.Errorf("feed %q: %w", f.Name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update feed %q: %w", f.Name, err)
	}
	f.CreatedAt, f.UpdatedAt = fromUS(created), ts
	return nil
}

func (s *sqlStore) DeleteFeed(ctx context.Context, name string) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM feeds WHERE name = ?`, name)
		if err == nil && n == 0 {
			err = fmt.Errorf("feed %q: %w", name, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete feed %q: %w", name, err)
	}
	return err
}

// ---- tokens ----

func scanToken(r row) (Token, error) {
	var t Token
	var created int64
	if err := r.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &created); err != nil {
		return t, err
	}
	t.CreatedAt = fromUS(created)
	return t, nil
}

func (s *sqlStore) ListTokens(ctx context.Context) ([]Token, error) {
	rs, err := s.b.query(ctx, `SELECT id, name, role, hash, created_at FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rs.Close()
	out := []Token{}
	for rs.Next() {
		t, err := scanToken(rs)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// CreateToken stores a token; ErrConflict if its id or hash exists.
func (s *sqlStore) CreateToken(ctx context.Context, tk *Token) error {
	if tk.ID == "" || tk.Hash == "" {
		return errors.New("token: id and hash are required")
	}
	ts := now()
	err := s.write(ctx, true, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO tokens (id, name, role, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			tk.ID, tk.Name, tk.Role, tk.Hash, ts.UnixMicro())
		return err
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("token %q: %w", tk.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create token %q: %w", tk.ID, err)
	}
	tk.CreatedAt = ts
	return nil
}

func (s *sqlStore) DeleteToken(ctx context.Context, id string) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM tokens WHERE id = ?`, id)
		if err == nil && n == 0 {
			err = fmt.Errorf("token %q: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete token %q: %w", id, err)
	}
	return err
}

func (s *sqlStore) TokenByHash(ctx context.Context, hash string) (Token, error) {
	t, err := scanToken(s.b.queryRow(ctx, `SELECT id, name, role, hash, created_at FROM tokens WHERE hash = ?`, hash))
	if isNoRows(err) {
		return t, fmt.Errorf("token: %w", ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("token by hash: %w", err)
	}
	return t, nil
}
