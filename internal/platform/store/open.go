package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Options selects and configures the backend.
type Options struct {
	// DSN is "sqlite" (the default, signalbox.db in DataDir),
	// "sqlite:/path/file.db", or a PostgreSQL URL "postgres://..." /
	// "postgresql://...". PostgreSQL objects go in the first schema of the
	// connection's search_path (e.g. "...?search_path=tenant1").
	DSN string
	// DataDir holds signalbox.db for the default SQLite DSN.
	DataDir string
	Logger  *slog.Logger
}

// Open connects to the store, applies pending migrations and returns it. A
// database written by a newer signalbox (a migration unknown here) is refused.
func Open(ctx context.Context, o Options) (Store, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "store")
	var b backend
	dsn := strings.TrimSpace(o.DSN)
	switch {
	case dsn == "" || dsn == "sqlite":
		if o.DataDir == "" {
			return nil, fmt.Errorf("store: sqlite needs a data directory")
		}
		if err := os.MkdirAll(o.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("store: data directory: %w", err)
		}
		sb, err := openSQLite(ctx, filepath.Join(o.DataDir, "signalbox.db"))
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		b = sb
	case strings.HasPrefix(dsn, "sqlite:"):
		file := strings.TrimPrefix(dsn, "sqlite:")
		if file == "" {
			return nil, fmt.Errorf("store: dsn %q: empty sqlite file path", dsn)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		sb, err := openSQLite(ctx, file)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		b = sb
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		pb, err := openPostgres(ctx, dsn, log)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		b = pb
	default:
		return nil, fmt.Errorf("store: dsn %q: want \"sqlite\", \"sqlite:/path/file.db\" or \"postgres://...\"", redactDSN(dsn))
	}
	n, err := migrate(ctx, b)
	if err != nil {
		b.close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if n > 0 {
		log.Info("store migrated", "backend", b.name(), "migrations_applied", n)
	}
	return &sqlStore{b: b, log: log, done: make(chan struct{})}, nil
}

// redactDSN keeps a password out of error messages.
func redactDSN(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		return "…" + dsn[i:]
	}
	return dsn
}
