package store

import (
	"context"
	"errors"
	"fmt"
)

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
