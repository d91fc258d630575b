package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrationFS embed.FS

type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads migrations/<dialect>/NNNN_name.sql in version order.
func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	ents, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	var out []migration
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: name must start with a positive version number and '_'", dir, e.Name())
		}
		b, err := fs.ReadFile(migrationFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// migrate applies the pending migrations in one transaction under a lock, so
// concurrent Opens of one database apply each migration once. A database that
// carries a migration this binary does not know was written by a newer
// signalbox and is refused rather than silently used.
func migrate(ctx context.Context, b backend) (applied int, err error) {
	ms, err := loadMigrations(b.name())
	if err != nil {
		return 0, err
	}
	t, err := b.begin(ctx, false)
	if err != nil {
		return 0, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = t.rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := t.lockMigrations(ctx); err != nil {
		return 0, fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := t.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return 0, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	known := make(map[int64]bool, len(ms))
	for _, m := range ms {
		known[m.version] = true
	}
	done := map[int64]bool{}
	rs, err := t.query(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return 0, fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	for rs.Next() {
		var v int64
		var name string
		if err := rs.Scan(&v, &name); err != nil {
			rs.Close()
			return 0, fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		if !known[v] {
			rs.Close()
			return 0, fmt.Errorf("database schema has migration %d (%s), unknown to this signalbox (it knows up to %d): the database was written by a newer version; upgrade signalbox", v, name, ms[len(ms)-1].version)
		}
		done[v] = true
	}
	if err := rs.Err(); err != nil {
		rs.Close()
		return 0, fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	rs.Close()
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		if _, err := t.exec(ctx, m.sql); err != nil {
			return 0, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return 0, fmt.Errorf("migration %s: record: %w", m.name, err)
		}
		applied++
	}
	if err := t.commit(ctx); err != nil {
		return 0, fmt.Errorf("migrate: commit: %w", err)
	}
	return applied, nil
}
