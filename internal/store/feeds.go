package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

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
