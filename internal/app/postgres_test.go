package app

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

// pgSchemaDSN gives the test its own PostgreSQL schema (dropped at the end)
// and returns a DSN that uses it.
func pgSchemaDSN(t *testing.T) string {
	t.Helper()
	dsn := testkit.PostgresDSN(t)
	var rnd [6]byte
	rand.Read(rnd[:])
	schema := "sbapp_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

// TestScaleOutOnPostgres: two CURRI nodes share one PostgreSQL store; a rule
// created through node A's API is applied by node B without a restart
// (LISTEN/NOTIFY, with version polling as the fallback).
func TestScaleOutOnPostgres(t *testing.T) {
	dsn := pgSchemaDSN(t)
	cfgA := testConfig(t, t.TempDir(), false)
	cfgA.Store = dsn
	a := startServer(t, cfgA)
	defer a.Shutdown()
	cfgB := testConfig(t, t.TempDir(), false)
	cfgB.Store = dsn
	b := startServer(t, cfgB)
	defer b.Shutdown()

	cb := dialCUCM(t, b.CURRIAddr())
	if _, body := cb.do("POST", "/curri/default", xacmlRequest("4155550123", "50102")); decisionOf(t, body) != "Permit" {
		t.Fatalf("before: %s", body)
	}
	if code, body := apiDo(t, a, "POST", "/api/v1/policies/default/lists/block/entries", `{"calling":"prefix:415555","note":"robocalls"}`); code != 201 {
		t.Fatalf("block entry on node A: %d %s", code, body)
	}
	start := time.Now()
	for {
		_, body := cb.do("POST", "/curri/default", xacmlRequest("4155550123", "50102"))
		if decisionOf(t, body) == "Deny" {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("node B did not apply node A's block entry: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("node B applied the change %v after node A committed it", time.Since(start).Round(time.Millisecond))
	// Node B's call log is in the shared store, searchable from node A.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := apiDo(t, a, "GET", "/api/v1/calls?number=4155550123&decision=deny", "")
		if code == 200 && strings.Contains(string(body), `"step":"block_list"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("call log via node A: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
