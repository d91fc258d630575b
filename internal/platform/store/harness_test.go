package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/signalbox/signalbox/internal/testkit"
)

// backendHarness hands out Options for a fresh, empty database; opening the
// same Options twice reaches the same database.
type backendHarness struct {
	name  string
	fresh func(t testing.TB) Options
}

func sqliteHarness() backendHarness {
	return backendHarness{name: "sqlite", fresh: func(t testing.TB) Options {
		return Options{DataDir: t.TempDir()}
	}}
}

// postgresHarness gives every database its own schema with a random name
// (search_path in the DSN), dropped at the end, so parallel test packages
// sharing one PostgreSQL never clash.
func postgresHarness(t testing.TB) backendHarness {
	dsn := testkit.PostgresDSN(t)
	return backendHarness{name: "postgres", fresh: func(t testing.TB) Options {
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			t.Fatal(err)
		}
		schema := "sbtest_" + hex.EncodeToString(rnd[:])
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect %s: %v", redactDSN(dsn), err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Errorf("cleanup connect: %v", err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return Options{DSN: dsn + sep + "search_path=" + schema}
	}}
}

func openT(t testing.TB, o Options) Store {
	t.Helper()
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	testStore(t, sqliteHarness())
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	testStore(t, postgresHarness(t))
}
