package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

const sharedCols = `id, name, description, kind, policies, action, entries, version, created_at, updated_at`

func scanShared(r row) (callpolicy.SharedList, error) {
	var l callpolicy.SharedList
	var kind string
	var policies, action []byte
	var created, updated int64
	if err := r.Scan(&l.ID, &l.Name, &l.Description, &kind, &policies, &action, &l.Entries, &l.Version, &created, &updated); err != nil {
		return l, err
	}
	l.Kind, l.CreatedAt, l.UpdatedAt = callpolicy.ListKind(kind), fromUS(created), fromUS(updated)
	if err := json.Unmarshal(policies, &l.Policies); err != nil {
		return l, fmt.Errorf("shared list %q: policies: %w", l.ID, err)
	}
	if len(l.Policies) == 0 {
		l.Policies = nil
	}
	var err error
	if l.Action, err = decodeAction(action); err != nil {
		return l, fmt.Errorf("shared list %q: action: %w", l.ID, err)
	}
	return l, nil
}

func encodeShared(l *callpolicy.SharedList) (policies string, action any, err error) {
	p := l.Policies
	if p == nil {
		p = []string{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", nil, err
	}
	if action, err = encodeAction(l.Action); err != nil {
		return "", nil, err
	}
	return string(b), action, nil
}

func (s *sqlStore) ListSharedLists(ctx context.Context) ([]callpolicy.SharedList, error) {
	rs, err := s.b.query(ctx, `SELECT `+sharedCols+` FROM shared_lists ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list shared lists: %w", err)
	}
	defer rs.Close()
	out := []callpolicy.SharedList{}
	for rs.Next() {
		l, err := scanShared(rs)
		if err != nil {
			return nil, fmt.Errorf("list shared lists: %w", err)
		}
		out = append(out, l)
	}
	return out, rs.Err()
}

func (s *sqlStore) GetSharedList(ctx context.Context, id string) (callpolicy.SharedList, error) {
	l, err := scanShared(s.b.queryRow(ctx, `SELECT `+sharedCols+` FROM shared_lists WHERE id = ?`, id))
	if isNoRows(err) {
		return l, fmt.Errorf("shared list %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("get shared list %q: %w", id, err)
	}
	return l, nil
}

func (s *sqlStore) CreateSharedList(ctx context.Context, l *callpolicy.SharedList) error {
	policies, action, err := encodeShared(l)
	if err != nil {
		return err
	}
	ts := now()
	err = s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `INSERT INTO shared_lists (`+sharedCols+`) VALUES (?, ?, ?, ?, ?, ?, 0, `+nextVersion+`, ?, ?) RETURNING version`,
			l.ID, l.Name, l.Description, string(l.Kind), policies, action, ts.UnixMicro(), ts.UnixMicro()).Scan(&l.Version)
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("shared list %q: %w", l.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create shared list %q: %w", l.ID, err)
	}
	l.Entries, l.CreatedAt, l.UpdatedAt = 0, ts, ts
	return nil
}

// UpdateSharedList changes a list's name, description, policies and
// action; its kind cannot change (ErrConflict).
func (s *sqlStore) UpdateSharedList(ctx context.Context, l *callpolicy.SharedList) error {
	policies, action, err := encodeShared(l)
	if err != nil {
		return err
	}
	ts := now()
	var created int64
	var kind string
	err = s.write(ctx, true, func(t tx) error {
		if err := t.queryRow(ctx, `SELECT kind FROM shared_lists WHERE id = ?`, l.ID).Scan(&kind); err != nil {
			return err
		}
		if kind != string(l.Kind) {
			return fmt.Errorf("shared list %q is a %s list; its kind cannot change: %w", l.ID, kind, ErrConflict)
		}
		return t.queryRow(ctx, `UPDATE shared_lists SET name = ?, description = ?, policies = ?, action = ?, version = `+nextVersion+`, updated_at = ?
			WHERE id = ? RETURNING created_at, entries, version`,
			l.Name, l.Description, policies, action, ts.UnixMicro(), l.ID).Scan(&created, &l.Entries, &l.Version)
	})
	if isNoRows(err) {
		return fmt.Errorf("shared list %q: %w", l.ID, ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("update shared list %q: %w", l.ID, err)
	}
	l.CreatedAt, l.UpdatedAt = fromUS(created), ts
	return nil
}

// DeleteSharedList deletes a list and its entries, unless it is a group a
// rule or another group names (ErrInUse, naming them).
func (s *sqlStore) DeleteSharedList(ctx context.Context, id string) error {
	err := s.write(ctx, true, func(t tx) error {
		users, err := groupUsers(ctx, t, id)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("group %q is named by %s: %w", id, strings.Join(users, ", "), ErrInUse)
		}
		n, err := t.exec(ctx, `DELETE FROM shared_lists WHERE id = ?`, id)
		if err == nil && n == 0 {
			err = fmt.Errorf("shared list %q: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInUse) {
		return fmt.Errorf("delete shared list %q: %w", id, err)
	}
	return err
}

// groupUsers names the rules and groups that name group id (at most ten).
func groupUsers(ctx context.Context, t tx, id string) ([]string, error) {
	ref := callpolicy.GroupPrefix + id
	var out []string
	rs, err := t.query(ctx, `SELECT id, policy_id FROM rules WHERE CAST(match_json AS TEXT) LIKE ? ORDER BY id LIMIT 10`, `%"`+ref+`"%`)
	if err != nil {
		return nil, err
	}
	for rs.Next() {
		var r int64
		var p string
		if err := rs.Scan(&r, &p); err != nil {
			rs.Close()
			return nil, err
		}
		out = append(out, fmt.Sprintf("rule %d of policy %q", r, p))
	}
	rs.Close()
	rs, err = t.query(ctx, `SELECT DISTINCT list_id FROM shared_list_entries WHERE calling = ? ORDER BY list_id LIMIT 10`, ref)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var g string
		if err := rs.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("group %q", g))
	}
	return out, rs.Err()
}

func scanSharedEntry(r row) (callpolicy.ListEntry, error) {
	var e callpolicy.ListEntry
	var expires sql.NullInt64
	var created int64
	var action []byte
	if err := r.Scan(&e.ID, &e.ListID, &e.Calling, &e.Called, &expires, &e.Note, &action, &created); err != nil {
		return e, err
	}
	e.ExpiresAt, e.CreatedAt = ptrUS(expires), fromUS(created)
	var err error
	if e.Action, err = decodeAction(action); err != nil {
		return e, fmt.Errorf("shared list entry %d: action: %w", e.ID, err)
	}
	return e, nil
}

const sharedEntryCols = `id, list_id, calling, called, expires_at, note, action, created_at`

var sharedEntryInsertCols = []string{"list_id", "calling", "called", "expires_at", "note", "action", "created_at"}

// ListSharedEntries lists a shared list's entries by id; with a list of
// kind it is the list as LoadSharedList reads it.
func (s *sqlStore) ListSharedEntries(ctx context.Context, id string) ([]callpolicy.ListEntry, error) {
	cfg, err := s.LoadSharedList(ctx, id)
	return cfg.Entries, err
}

// LoadSharedList reads a list and its entries from one read snapshot.
func (s *sqlStore) LoadSharedList(ctx context.Context, id string) (callpolicy.SharedListConfig, error) {
	var cfg callpolicy.SharedListConfig
	err := s.read(ctx, func(t tx) error {
		var err error
		cfg.List, err = scanShared(t.queryRow(ctx, `SELECT `+sharedCols+` FROM shared_lists WHERE id = ?`, id))
		if isNoRows(err) {
			return fmt.Errorf("shared list %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		cfg.Entries = make([]callpolicy.ListEntry, 0, cfg.List.Entries)
		rs, err := t.query(ctx, `SELECT `+sharedEntryCols+` FROM shared_list_entries WHERE list_id = ? ORDER BY id`, id)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			e, err := scanSharedEntry(rs)
			if err != nil {
				return err
			}
			cfg.Entries = append(cfg.Entries, e)
		}
		return rs.Err()
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return cfg, fmt.Errorf("load shared list %q: %w", id, err)
	}
	return cfg, err
}

// AddSharedEntries inserts all entries or none, setting their IDs.
func (s *sqlStore) AddSharedEntries(ctx context.Context, id string, entries []callpolicy.ListEntry) error {
	actions := make([]any, len(entries))
	for i := range entries {
		if entries[i].Calling == "" {
			return fmt.Errorf("entry %d: calling is required", i)
		}
		var err error
		if actions[i], err = encodeAction(entries[i].Action); err != nil {
			return fmt.Errorf("entry %d: action: %w", i, err)
		}
	}
	ts := now()
	var ids []int64
	err := s.write(ctx, true, func(t tx) error {
		if err := sharedTouch(ctx, t, id, len(entries), ts.UnixMicro()); err != nil {
			return err
		}
		var err error
		ids, err = t.insertIDs(ctx, "shared_list_entries", sharedEntryInsertCols, len(entries), func(i int) []any {
			e := &entries[i]
			return []any{id, e.Calling, e.Called, nullUS(e.ExpiresAt), e.Note, actions[i], ts.UnixMicro()}
		}, nil)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("add entries to shared list %q: %w", id, err)
	}
	for i := range entries {
		entries[i].ID, entries[i].ListID, entries[i].PolicyID, entries[i].CreatedAt = ids[i], id, "", ts
	}
	return nil
}

// sharedTouch moves a list's entry count by delta and its version to the
// one being committed; ErrNotFound when there is no such list.
func sharedTouch(ctx context.Context, t tx, id string, delta int, ts int64) error {
	n, err := t.exec(ctx, `UPDATE shared_lists SET entries = entries + ?, version = `+nextVersion+`, updated_at = ? WHERE id = ?`, delta, ts, id)
	if err == nil && n == 0 {
		err = fmt.Errorf("shared list %q: %w", id, ErrNotFound)
	}
	return err
}

func (s *sqlStore) DeleteSharedEntry(ctx context.Context, id string, entryID int64) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM shared_list_entries WHERE id = ? AND list_id = ?`, entryID, id)
		if err == nil && n == 0 {
			return fmt.Errorf("entry %d of shared list %q: %w", entryID, id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		return sharedTouch(ctx, t, id, -1, now().UnixMicro())
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete entry %d: %w", entryID, err)
	}
	return err
}
