package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

const entryCols = `id, policy_id, list, calling, called, expires_at, note, created_at, action`

var entryInsertCols = []string{"policy_id", "list", "calling", "called", "expires_at", "note", "created_at", "action"}

func scanEntry(r row) (callpolicy.ListEntry, error) {
	var e callpolicy.ListEntry
	var list string
	var expires sql.NullInt64
	var created int64
	var action []byte
	if err := r.Scan(&e.ID, &e.PolicyID, &list, &e.Calling, &e.Called, &expires, &e.Note, &created, &action); err != nil {
		return e, err
	}
	var err error
	if e.Action, err = decodeAction(action); err != nil {
		return e, fmt.Errorf("list entry %d: action: %w", e.ID, err)
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
	actions := make([]any, len(entries))
	for i := range entries {
		var err error
		if actions[i], err = encodeAction(entries[i].Action); err != nil {
			return fmt.Errorf("entry %d: action: %w", i, err)
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
			return []any{policyID, string(list), e.Calling, e.Called, nullUS(e.ExpiresAt), e.Note, ts.UnixMicro(), actions[i]}
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
