package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

const policyCols = `id, name, description, default_action, rate_limit, created_at, updated_at, allow_action, block_action, reputation`

func scanPolicy(r row) (callpolicy.Policy, error) {
	var p callpolicy.Policy
	var action, limit, allow, block, rep []byte
	var created, updated int64
	if err := r.Scan(&p.ID, &p.Name, &p.Description, &action, &limit, &created, &updated, &allow, &block, &rep); err != nil {
		return p, err
	}
	if len(rep) > 0 {
		p.Reputation = new(callpolicy.Reputation)
		if err := json.Unmarshal(rep, p.Reputation); err != nil {
			return p, fmt.Errorf("policy %q: reputation: %w", p.ID, err)
		}
	}
	var err error
	if p.AllowAction, err = decodeAction(allow); err != nil {
		return p, fmt.Errorf("policy %q: allow_action: %w", p.ID, err)
	}
	if p.BlockAction, err = decodeAction(block); err != nil {
		return p, fmt.Errorf("policy %q: block_action: %w", p.ID, err)
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

// decodeAction reads a nullable JSON action column.
func decodeAction(b []byte) (*callpolicy.Action, error) {
	if len(b) == 0 {
		return nil, nil
	}
	a := new(callpolicy.Action)
	if err := json.Unmarshal(b, a); err != nil {
		return nil, err
	}
	return a, nil
}

// encodeAction writes a nullable JSON action column.
func encodeAction(a *callpolicy.Action) (any, error) {
	if a == nil {
		return nil, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// listActions encodes a policy's allow_action and block_action, and its
// reputation settings.
func listActions(p *callpolicy.Policy) (allow, block, rep any, err error) {
	if allow, err = encodeAction(p.AllowAction); err != nil {
		return nil, nil, nil, fmt.Errorf("policy %q: allow_action: %w", p.ID, err)
	}
	if block, err = encodeAction(p.BlockAction); err != nil {
		return nil, nil, nil, fmt.Errorf("policy %q: block_action: %w", p.ID, err)
	}
	if p.Reputation != nil {
		b, err := json.Marshal(p.Reputation)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("policy %q: reputation: %w", p.ID, err)
		}
		rep = string(b)
	}
	return allow, block, rep, nil
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
	allow, block, rep, err := listActions(p)
	if err != nil {
		return err
	}
	ts := now()
	err = s.write(ctx, true, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO policies (`+policyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.Name, p.Description, action, limit, ts.UnixMicro(), ts.UnixMicro(), allow, block, rep)
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
	allow, block, rep, err := listActions(p)
	if err != nil {
		return err
	}
	ts := now()
	var created int64
	err = s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `UPDATE policies SET name = ?, description = ?, default_action = ?, rate_limit = ?, updated_at = ?,
			allow_action = ?, block_action = ?, reputation = ?
			WHERE id = ? RETURNING created_at`,
			p.Name, p.Description, action, limit, ts.UnixMicro(), allow, block, rep, p.ID).Scan(&created)
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
