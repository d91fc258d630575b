package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// A bulk replacement on SQLite drops the rules index and builds it again
// in the same transaction (dropRuleIndexForBulk): the index must come back
// exactly as the migrations define it, and the rules must read back in
// order through it.
func TestSQLiteBulkReplaceRebuildsIndex(t *testing.T) {
	s := openT(t, sqliteHarness().fresh(t))
	w := s.(*sqlStore).b.(*sqliteBackend).w
	indexSQL := func() string {
		var q string
		if err := w.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'rules_policy_order'`).Scan(&q); err != nil {
			t.Fatalf("rules index: %v", err)
		}
		return q
	}
	before := indexSQL()
	if before != ruleIndexDDL {
		t.Fatalf("migrations define %q, ruleIndexDDL is %q", before, ruleIndexDDL)
	}
	rules := genRules(12_000)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.ReplaceRules(rctx, callpolicy.DefaultPolicyID, rules, nil); err != nil {
		t.Fatal(err)
	}
	if got := indexSQL(); got != before {
		t.Errorf("index after a bulk replace: %q", got)
	}
	var plan string
	var id, parent, notused int
	if err := w.QueryRow(`EXPLAIN QUERY PLAN SELECT id FROM rules WHERE policy_id = ? ORDER BY priority, id`, "default").
		Scan(&id, &parent, &notused, &plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "rules_policy_order") {
		t.Errorf("query plan %q does not use the rules index", plan)
	}
	got, err := s.ListRules(ctx, callpolicy.DefaultPolicyID)
	if err != nil || len(got) != len(rules) {
		t.Fatalf("list: %d rules, %v", len(got), err)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Priority < got[i-1].Priority || got[i].Priority == got[i-1].Priority && got[i].ID < got[i-1].ID {
			t.Fatalf("rules out of order at %d", i)
		}
	}
	// A second policy's small replace keeps the index (it is the minority).
	if err := s.CreatePolicy(ctx, &callpolicy.Policy{ID: "p2", DefaultAction: callpolicy.Action{Decision: "permit"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceRules(rctx, "p2", genRules(10_000), nil); err != nil {
		t.Fatal(err)
	}
	if got := indexSQL(); got != before {
		t.Errorf("index after a minority bulk replace: %q", got)
	}
}

// The page caches are bounded per connection (writerCache, readerCache):
// SQLite's memory counts in the server's RSS, outside the Go heap.
func TestSQLitePageCacheSizes(t *testing.T) {
	s := openT(t, sqliteHarness().fresh(t))
	b := s.(*sqlStore).b.(*sqliteBackend)
	for _, c := range []struct {
		name string
		db   *sql.DB
		want int
	}{{"writer", b.w, -4096}, {"reader", b.r, -2048}} {
		var got int
		if err := c.db.QueryRow(`PRAGMA cache_size`).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: cache_size %d, want %d", c.name, got, c.want)
		}
	}
}
