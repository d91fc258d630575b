package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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
