package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// specTable is a table of named JSON specs (feeds, webhooks): name, spec,
// created_at, updated_at. The store keeps the spec as it was validated;
// what it means is the owning package's.
type specTable struct {
	table string // SQL table
	kind  string // in errors: "feed", "webhook"
}

var (
	feedsTable    = specTable{table: "feeds", kind: "feed"}
	webhooksTable = specTable{table: "webhooks", kind: "webhook"}
	tracesTable   = specTable{table: "traces", kind: "trace"}
)

func scanSpec(r row) (SpecRecord, error) {
	var f SpecRecord
	var spec []byte
	var created, updated int64
	if err := r.Scan(&f.Name, &spec, &created, &updated); err != nil {
		return f, err
	}
	f.Spec = json.RawMessage(spec)
	f.CreatedAt, f.UpdatedAt = fromUS(created), fromUS(updated)
	return f, nil
}

func (st specTable) check(f *SpecRecord) error {
	if f.Name == "" {
		return fmt.Errorf("%s: empty name", st.kind)
	}
	if !json.Valid(f.Spec) {
		return fmt.Errorf("%s %q: spec is not valid JSON", st.kind, f.Name)
	}
	return nil
}

func (st specTable) list(ctx context.Context, s *sqlStore) ([]SpecRecord, error) {
	rs, err := s.b.query(ctx, `SELECT name, spec, created_at, updated_at FROM `+st.table+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", st.kind, err)
	}
	defer rs.Close()
	out := []SpecRecord{}
	for rs.Next() {
		f, err := scanSpec(rs)
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", st.kind, err)
		}
		out = append(out, f)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list %ss: %w", st.kind, err)
	}
	return out, nil
}

func (st specTable) get(ctx context.Context, s *sqlStore, name string) (SpecRecord, error) {
	f, err := scanSpec(s.b.queryRow(ctx, `SELECT name, spec, created_at, updated_at FROM `+st.table+` WHERE name = ?`, name))
	if isNoRows(err) {
		return f, fmt.Errorf("%s %q: %w", st.kind, name, ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("get %s %q: %w", st.kind, name, err)
	}
	return f, nil
}

func (st specTable) create(ctx context.Context, s *sqlStore, f *SpecRecord) error {
	if err := st.check(f); err != nil {
		return err
	}
	ts := now()
	err := s.write(ctx, true, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO `+st.table+` (name, spec, created_at, updated_at) VALUES (?, ?, ?, ?)`,
			f.Name, string(f.Spec), ts.UnixMicro(), ts.UnixMicro())
		return err
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("%s %q: %w", st.kind, f.Name, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create %s %q: %w", st.kind, f.Name, err)
	}
	f.CreatedAt, f.UpdatedAt = ts, ts
	return nil
}

func (st specTable) update(ctx context.Context, s *sqlStore, f *SpecRecord) error {
	if err := st.check(f); err != nil {
		return err
	}
	ts := now()
	var created int64
	err := s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `UPDATE `+st.table+` SET spec = ?, updated_at = ? WHERE name = ? RETURNING created_at`,
			string(f.Spec), ts.UnixMicro(), f.Name).Scan(&created)
	})
	if isNoRows(err) {
		return fmt.Errorf("%s %q: %w", st.kind, f.Name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update %s %q: %w", st.kind, f.Name, err)
	}
	f.CreatedAt, f.UpdatedAt = fromUS(created), ts
	return nil
}

func (st specTable) delete(ctx context.Context, s *sqlStore, name string) error {
	err := s.write(ctx, true, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM `+st.table+` WHERE name = ?`, name)
		if err == nil && n == 0 {
			err = fmt.Errorf("%s %q: %w", st.kind, name, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete %s %q: %w", st.kind, name, err)
	}
	return err
}

func (s *sqlStore) ListFeeds(ctx context.Context) ([]FeedRecord, error) {
	return feedsTable.list(ctx, s)
}
func (s *sqlStore) GetFeed(ctx context.Context, name string) (FeedRecord, error) {
	return feedsTable.get(ctx, s, name)
}
func (s *sqlStore) CreateFeed(ctx context.Context, f *FeedRecord) error {
	return feedsTable.create(ctx, s, f)
}
func (s *sqlStore) UpdateFeed(ctx context.Context, f *FeedRecord) error {
	return feedsTable.update(ctx, s, f)
}
func (s *sqlStore) DeleteFeed(ctx context.Context, name string) error {
	return feedsTable.delete(ctx, s, name)
}

func (s *sqlStore) ListWebhooks(ctx context.Context) ([]WebhookRecord, error) {
	return webhooksTable.list(ctx, s)
}
func (s *sqlStore) GetWebhook(ctx context.Context, name string) (WebhookRecord, error) {
	return webhooksTable.get(ctx, s, name)
}
func (s *sqlStore) CreateWebhook(ctx context.Context, w *WebhookRecord) error {
	return webhooksTable.create(ctx, s, w)
}
func (s *sqlStore) UpdateWebhook(ctx context.Context, w *WebhookRecord) error {
	return webhooksTable.update(ctx, s, w)
}
func (s *sqlStore) DeleteWebhook(ctx context.Context, name string) error {
	return webhooksTable.delete(ctx, s, name)
}

func (s *sqlStore) ListTraces(ctx context.Context) ([]TraceRecord, error) {
	return tracesTable.list(ctx, s)
}
func (s *sqlStore) GetTrace(ctx context.Context, id string) (TraceRecord, error) {
	return tracesTable.get(ctx, s, id)
}
func (s *sqlStore) CreateTrace(ctx context.Context, t *TraceRecord) error {
	return tracesTable.create(ctx, s, t)
}
func (s *sqlStore) UpdateTrace(ctx context.Context, t *TraceRecord) error {
	return tracesTable.update(ctx, s, t)
}
func (s *sqlStore) DeleteTrace(ctx context.Context, id string) error {
	return tracesTable.delete(ctx, s, id)
}
