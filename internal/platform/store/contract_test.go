package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// testStore is the contract every backend meets.
func testStore(t *testing.T, h backendHarness) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h backendHarness)
	}{
		{"DefaultPolicyAndReopen", testDefaultPolicyAndReopen},
		{"NewerSchemaRefused", testNewerSchemaRefused},
		{"Policies", testPolicies},
		{"Rules", testRules},
		{"ReplaceRules", testReplaceRules},
		{"RuleHits", testRuleHits},
		{"Entries", testEntries},
		{"CascadeAndLoad", testCascadeAndLoad},
		{"Calls", testCalls},
		{"Prune", testPrune},
		{"CallSegments", testCallSegments},
		{"Feeds", testFeeds},
		{"Webhooks", testWebhooks},
		{"Traces", testTraces},
		{"Tokens", testTokens},
		{"Sessions", testSessions},
		{"Changes", testChanges},
		{"BulkRules", testBulkRules},
		{"Directories", testDirectories},
		{"ListActions", testListActions},
		{"SharedLists", testSharedLists},
		{"RateCounts", testRateCounts},
		{"Audit", testAudit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

var ctx = context.Background()

func version(t *testing.T, s Store) int64 {
	t.Helper()
	v, err := s.ConfigVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// bumps checks that fn changes the config version by exactly want.
func bumps(t *testing.T, s Store, want int64, what string, fn func() error) {
	t.Helper()
	before := version(t, s)
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := version(t, s) - before; got != want {
		t.Errorf("%s: config version moved by %d, want %d", what, got, want)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

func testDefaultPolicyAndReopen(t *testing.T, h backendHarness) {
	o := h.fresh(t)
	s := openT(t, o)
	if s.Backend() != h.name {
		t.Errorf("Backend() = %q, want %q", s.Backend(), h.name)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.GetPolicy(ctx, callpolicy.DefaultPolicyID)
	if err != nil {
		t.Fatalf("default policy: %v", err)
	}
	if p.Name != "Default" || p.DefaultAction.Decision != callpolicy.Permit || p.CreatedAt.IsZero() {
		t.Errorf("default policy = %+v", p)
	}
	v := version(t, s)
	// A deleted default policy stays deleted: it is created on first start only.
	if err := s.DeletePolicy(ctx, callpolicy.DefaultPolicyID); err != nil {
		t.Fatal(err)
	}
	v++
	s.Close()
	s2 := openT(t, o)
	if got := version(t, s2); got != v {
		t.Errorf("version after reopen = %d, want %d", got, v)
	}
	_, err = s2.GetPolicy(ctx, callpolicy.DefaultPolicyID)
	wantErr(t, err, ErrNotFound, "default policy after delete and reopen")
}

func testNewerSchemaRefused(t *testing.T, h backendHarness) {
	o := h.fresh(t)
	s := openT(t, o)
	tx, err := s.(*sqlStore).b.begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		9999, "9999_future.sql", 0); err != nil {
		t.Fatal(err)
	}
	if err := tx.commit(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "newer version") || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("open of a newer schema: err = %v, want a refusal naming migration 9999", err)
	}
}

func testPolicies(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	p := callpolicy.Policy{
		ID: "sales", Name: "Sales", Description: "sales floor",
		DefaultAction: callpolicy.Action{Decision: callpolicy.Divert, Destination: "+4930100",
			Modify: &callpolicy.Modify{CallingName: "Sales"}, ResetCallHistory: "resetLastHop"},
		RateLimit: &callpolicy.RateLimit{PerCalling: &callpolicy.Limit{Calls: 5, WindowSeconds: 60}, BlockSeconds: 300,
			Action: &callpolicy.Action{Decision: callpolicy.Deny, Reason: "rate"}},
	}
	bumps(t, s, 1, "create", func() error { return s.CreatePolicy(ctx, &p) })
	if p.CreatedAt.IsZero() || !p.CreatedAt.Equal(p.UpdatedAt) || p.CreatedAt.Location() != time.UTC {
		t.Errorf("timestamps not set: %+v", p)
	}
	got, err := s.GetPolicy(ctx, "sales")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, p)
	}
	dup := callpolicy.Policy{ID: "sales", Name: "again", DefaultAction: callpolicy.Action{Decision: "permit"}}
	bumps(t, s, 0, "create duplicate", func() error {
		wantErr(t, s.CreatePolicy(ctx, &dup), ErrConflict, "create duplicate")
		return nil
	})
	if err := s.CreatePolicy(ctx, &callpolicy.Policy{}); err == nil {
		t.Error("create with empty id: no error")
	}

	time.Sleep(2 * time.Millisecond)
	p.Name, p.RateLimit, p.DefaultAction = "Sales EMEA", nil, callpolicy.Action{Decision: callpolicy.Deny, Announce: "x"}
	bumps(t, s, 1, "update", func() error { return s.UpdatePolicy(ctx, &p) })
	got, _ = s.GetPolicy(ctx, "sales")
	if !reflect.DeepEqual(got, p) || !got.UpdatedAt.After(got.CreatedAt) {
		t.Errorf("after update:\n got %+v\nwant %+v", got, p)
	}
	wantErr(t, s.UpdatePolicy(ctx, &callpolicy.Policy{ID: "nope"}), ErrNotFound, "update missing")

	list, err := s.ListPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range list {
		ids = append(ids, p.ID)
	}
	if !reflect.DeepEqual(ids, []string{"default", "sales"}) {
		t.Errorf("list ids = %v", ids)
	}
	bumps(t, s, 1, "delete", func() error { return s.DeletePolicy(ctx, "sales") })
	wantErr(t, s.DeletePolicy(ctx, "sales"), ErrNotFound, "delete again")
	_, err = s.GetPolicy(ctx, "sales")
	wantErr(t, err, ErrNotFound, "get deleted")
}

func mkPolicy(t *testing.T, s Store, id string) {
	t.Helper()
	if err := s.CreatePolicy(ctx, &callpolicy.Policy{ID: id, Name: id, DefaultAction: callpolicy.Action{Decision: callpolicy.Permit}}); err != nil {
		t.Fatal(err)
	}
}

func testRules(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	mkPolicy(t, s, "p")
	exp := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CET", 3600))
	rules := []callpolicy.Rule{
		{PolicyID: "p", Priority: 20, Enabled: true, Match: callpolicy.Match{Called: "prefix:0900"},
			Action: callpolicy.Action{Decision: callpolicy.Deny, Reason: "premium"}},
		{PolicyID: "p", Priority: 10, Enabled: false,
			Match:     callpolicy.Match{Calling: "regex:^\\+49.*$", TransformedCalled: "pattern:9.1XXX", TriggerPoint: "ingress", DeviceName: "SEP1"},
			Action:    callpolicy.Action{Decision: callpolicy.Permit, Modify: &callpolicy.Modify{CallingNumber: "+4930", CalledName: "Ops"}},
			Schedule:  &callpolicy.Schedule{Days: []string{"mon", "fri"}, From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"},
			ExpiresAt: &exp, Description: "night", Tags: []string{"night", "ops"}},
		{PolicyID: "p", Priority: 20, Enabled: true, Action: callpolicy.Action{Decision: callpolicy.Divert, Destination: "100"}},
	}
	for i := range rules {
		bumps(t, s, 1, "create rule", func() error { return s.CreateRule(ctx, &rules[i]) })
		if rules[i].ID == 0 || rules[i].CreatedAt.IsZero() {
			t.Fatalf("rule %d: id/created not set: %+v", i, rules[i])
		}
	}
	got, err := s.ListRules(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// priority, then id
	want := []callpolicy.Rule{rules[1], rules[0], rules[2]}
	utc := exp.UTC().Truncate(time.Microsecond)
	want[0].ExpiresAt = &utc
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListRules:\n got %+v\nwant %+v", got, want)
	}
	if got[0].ExpiresAt.Location() != time.UTC {
		t.Errorf("expiry not in UTC: %v", got[0].ExpiresAt)
	}
	one, err := s.GetRule(ctx, rules[1].ID)
	if err != nil || !reflect.DeepEqual(one, want[0]) {
		t.Errorf("GetRule = %+v, %v", one, err)
	}
	_, err = s.GetRule(ctx, 999999)
	wantErr(t, err, ErrNotFound, "get missing rule")

	wantErr(t, s.CreateRule(ctx, &callpolicy.Rule{PolicyID: "nope", Action: callpolicy.Action{Decision: "permit"}}), ErrNotFound, "rule in missing policy")
	_, err = s.ListRules(ctx, "nope")
	wantErr(t, err, ErrNotFound, "list rules of missing policy")
	mkPolicy(t, s, "empty")
	if rs, err := s.ListRules(ctx, "empty"); err != nil || rs == nil || len(rs) != 0 {
		t.Errorf("rules of empty policy = %v, %v; want empty non-nil", rs, err)
	}

	if err := s.AddRuleHits(ctx, map[int64]RuleHit{rules[0].ID: {Count: 3, Last: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	upd := rules[0]
	upd.PolicyID = ""
	upd.Priority, upd.Tags, upd.Schedule = 5, []string{"x"}, &callpolicy.Schedule{From: "08:00", To: "17:00"}
	bumps(t, s, 1, "update rule", func() error { return s.UpdateRule(ctx, &upd) })
	if upd.PolicyID != "p" || upd.Hits != 3 || upd.LastHitAt == nil || !upd.CreatedAt.Equal(rules[0].CreatedAt) {
		t.Errorf("update did not keep policy/hits/created: %+v", upd)
	}
	one, _ = s.GetRule(ctx, upd.ID)
	if !reflect.DeepEqual(one, upd) {
		t.Errorf("after update:\n got %+v\nwant %+v", one, upd)
	}
	wrong := upd
	wrong.PolicyID = "empty"
	wantErr(t, s.UpdateRule(ctx, &wrong), ErrNotFound, "update rule under another policy")
	wantErr(t, s.UpdateRule(ctx, &callpolicy.Rule{ID: 999999}), ErrNotFound, "update missing rule")

	bumps(t, s, 1, "delete rule", func() error { return s.DeleteRule(ctx, rules[2].ID) })
	wantErr(t, s.DeleteRule(ctx, rules[2].ID), ErrNotFound, "delete rule again")
	// ids are never reused, since the call log refers to them
	r := callpolicy.Rule{PolicyID: "p", Action: callpolicy.Action{Decision: "permit"}}
	if err := s.CreateRule(ctx, &r); err != nil {
		t.Fatal(err)
	}
	if r.ID <= rules[2].ID {
		t.Errorf("new rule id %d reuses or precedes deleted id %d", r.ID, rules[2].ID)
	}
}

func testReplaceRules(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	mkPolicy(t, s, "p")
	mkPolicy(t, s, "other")
	keep := callpolicy.Rule{PolicyID: "other", Action: callpolicy.Action{Decision: "deny"}}
	if err := s.CreateRule(ctx, &keep); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	in := []callpolicy.Rule{
		{Priority: 3, Enabled: true, Match: callpolicy.Match{Called: "911"}, Action: callpolicy.Action{Decision: "permit"}, Tags: []string{"a"}},
		{Priority: 1, Enabled: true, Action: callpolicy.Action{Decision: "deny"}, ExpiresAt: &exp,
			Schedule: &callpolicy.Schedule{Days: []string{"sat"}}},
		{Priority: 2, Action: callpolicy.Action{Decision: "divert", Destination: "1", Modify: &callpolicy.Modify{CalledNumber: "2"}}},
	}
	for round := range 2 {
		// idsSet sees the rules as they will be stored, before the rows
		// are written (a reader still sees the previous rules).
		var atIDs []callpolicy.Rule
		var before []callpolicy.Rule
		idsSet := func() {
			atIDs = slices.Clone(in)
			var err error
			if before, err = s.ListRules(ctx, "p"); err != nil {
				t.Error(err)
			}
		}
		prev, _ := s.ListRules(ctx, "p")
		bumps(t, s, 1, "replace", func() error { return s.ReplaceRules(ctx, "p", in, idsSet) })
		got, err := s.ListRules(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(atIDs, in) {
			t.Errorf("round %d: idsSet saw\n %+v\nthen ReplaceRules returned\n %+v", round, atIDs, in)
		}
		if len(before) != len(prev) {
			t.Errorf("round %d: while idsSet ran a reader saw %d rules, want the previous %d", round, len(before), len(prev))
		}
		if len(got) != 3 {
			t.Fatalf("round %d: %d rules, want 3", round, len(got))
		}
		for i, wi := range []int{1, 2, 0} {
			g, w := got[i], in[wi]
			if g.PolicyID != "p" || g.Priority != w.Priority || g.Enabled != w.Enabled || !reflect.DeepEqual(g.Match, w.Match) ||
				!reflect.DeepEqual(g.Action, w.Action) || !reflect.DeepEqual(g.Schedule, w.Schedule) ||
				!reflect.DeepEqual(g.Tags, w.Tags) || !reflect.DeepEqual(g.ExpiresAt, w.ExpiresAt) || g.Hits != 0 {
				t.Errorf("round %d rule %d:\n got %+v\nwant %+v", round, i, g, w)
			}
			// ReplaceRules hands back the rules as stored.
			if !reflect.DeepEqual(g, w) {
				t.Errorf("round %d rule %d: stored\n %+v\nbut ReplaceRules set\n %+v", round, i, g, w)
			}
		}
	}
	bumps(t, s, 1, "replace with none", func() error { return s.ReplaceRules(ctx, "p", nil, nil) })
	if got, _ := s.ListRules(ctx, "p"); len(got) != 0 {
		t.Errorf("after empty replace: %d rules", len(got))
	}
	if got, _ := s.ListRules(ctx, "other"); len(got) != 1 {
		t.Errorf("other policy's rules touched: %d", len(got))
	}
	wantErr(t, s.ReplaceRules(ctx, "nope", in, nil), ErrNotFound, "replace in missing policy")
}

func testRuleHits(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	mkPolicy(t, s, "p")
	a := callpolicy.Rule{PolicyID: "p", Action: callpolicy.Action{Decision: "permit"}}
	b := a
	if err := s.CreateRule(ctx, &a); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRule(ctx, &b); err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	bumps(t, s, 0, "hits", func() error {
		return s.AddRuleHits(ctx, map[int64]RuleHit{a.ID: {Count: 2, Last: t2}, b.ID: {Count: 1}, 424242: {Count: 9, Last: t1}})
	})
	bumps(t, s, 0, "hits", func() error {
		return s.AddRuleHits(ctx, map[int64]RuleHit{a.ID: {Count: 5, Last: t1}}) // older: last stays t2
	})
	ga, _ := s.GetRule(ctx, a.ID)
	gb, _ := s.GetRule(ctx, b.ID)
	if ga.Hits != 7 || ga.LastHitAt == nil || !ga.LastHitAt.Equal(t2) {
		t.Errorf("rule a hits = %d last = %v, want 7 %v", ga.Hits, ga.LastHitAt, t2)
	}
	if gb.Hits != 1 || gb.LastHitAt != nil {
		t.Errorf("rule b hits = %d last = %v, want 1 nil", gb.Hits, gb.LastHitAt)
	}
}

func testEntries(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	mkPolicy(t, s, "p")
	exp := time.Date(2032, 2, 3, 4, 5, 6, 7000, time.FixedZone("X", -7200))
	block := []callpolicy.ListEntry{
		{Calling: "+4930123", Note: "spam"},
		{Calling: "prefix:+88", Called: "pattern:9XX", ExpiresAt: &exp},
	}
	bumps(t, s, 1, "add block", func() error { return s.AddEntries(ctx, "p", callpolicy.BlockList, block) })
	for i, e := range block {
		if e.ID == 0 || e.PolicyID != "p" || e.List != callpolicy.BlockList || e.CreatedAt.IsZero() {
			t.Errorf("entry %d not filled in: %+v", i, e)
		}
	}
	allow := []callpolicy.ListEntry{{Calling: "100"}}
	if err := s.AddEntries(ctx, "p", callpolicy.AllowList, allow); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListEntries(ctx, "p", callpolicy.BlockList)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]callpolicy.ListEntry(nil), block...)
	utc := exp.UTC()
	want[1].ExpiresAt = &utc
	if !reflect.DeepEqual(got, want) {
		t.Errorf("block list:\n got %+v\nwant %+v", got, want)
	}
	both, _ := s.ListEntries(ctx, "p", "")
	if len(both) != 3 {
		t.Errorf("both lists: %d entries, want 3", len(both))
	}

	bad := []callpolicy.ListEntry{{Calling: "1"}, {Calling: "2"}, {Calling: ""}, {Calling: "4"}}
	bumps(t, s, 0, "failing batch", func() error {
		if err := s.AddEntries(ctx, "p", callpolicy.AllowList, bad); err == nil || !strings.Contains(err.Error(), "entry 2") {
			t.Errorf("failing batch: err = %v, want one naming entry 2", err)
		}
		return nil
	})
	if got, _ := s.ListEntries(ctx, "p", callpolicy.AllowList); len(got) != 1 {
		t.Errorf("failing batch left %d allow entries, want 1", len(got))
	}
	if err := s.AddEntries(ctx, "p", "grey", allow); err == nil {
		t.Error("list kind grey accepted")
	}
	if _, err := s.ListEntries(ctx, "p", "grey"); err == nil {
		t.Error("list kind grey accepted by ListEntries")
	}
	wantErr(t, s.AddEntries(ctx, "nope", callpolicy.AllowList, allow), ErrNotFound, "entries in missing policy")
	_, err = s.ListEntries(ctx, "nope", callpolicy.AllowList)
	wantErr(t, err, ErrNotFound, "list entries of missing policy")

	wantErr(t, s.DeleteEntry(ctx, "p", callpolicy.AllowList, block[0].ID), ErrNotFound, "delete from wrong list")
	bumps(t, s, 1, "delete entry", func() error { return s.DeleteEntry(ctx, "p", callpolicy.BlockList, block[0].ID) })
	wantErr(t, s.DeleteEntry(ctx, "p", callpolicy.BlockList, block[0].ID), ErrNotFound, "delete entry again")

	// a big batch takes the bulk path and keeps ids in order
	big := make([]callpolicy.ListEntry, 2500)
	for i := range big {
		big[i].Calling = fmt.Sprintf("+1555%07d", i)
	}
	if err := s.AddEntries(ctx, "p", callpolicy.BlockList, big); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ListEntries(ctx, "p", callpolicy.BlockList)
	byID := map[int64]string{}
	for _, e := range got {
		byID[e.ID] = e.Calling
	}
	for i, e := range big {
		if byID[e.ID] != e.Calling {
			t.Fatalf("big batch entry %d: id %d holds %q, want %q", i, e.ID, byID[e.ID], e.Calling)
		}
	}
}

func testCascadeAndLoad(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	mkPolicy(t, s, "a")
	mkPolicy(t, s, "b")
	for _, p := range []string{"a", "b"} {
		if err := s.ReplaceRules(ctx, p, []callpolicy.Rule{
			{Priority: 2, Action: callpolicy.Action{Decision: "deny"}, Description: p + "2"},
			{Priority: 1, Action: callpolicy.Action{Decision: "permit"}, Description: p + "1"},
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEntries(ctx, p, callpolicy.AllowList, []callpolicy.ListEntry{{Calling: p + "-allow"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddEntries(ctx, p, callpolicy.BlockList, []callpolicy.ListEntry{{Calling: p + "-b1"}, {Calling: p + "-b2"}}); err != nil {
			t.Fatal(err)
		}
	}
	pcs, err := s.LoadPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := func(pcs []callpolicy.PolicyConfig) map[string]callpolicy.PolicyConfig {
		m := map[string]callpolicy.PolicyConfig{}
		for _, pc := range pcs {
			m[pc.Policy.ID] = pc
		}
		return m
	}
	m := byID(pcs)
	if len(pcs) != 3 || len(m) != 3 {
		t.Fatalf("LoadPolicies: %d policies, want 3 (default, a, b)", len(pcs))
	}
	for _, p := range []string{"a", "b"} {
		pc := m[p]
		if len(pc.Rules) != 2 || pc.Rules[0].Description != p+"1" || pc.Rules[1].Description != p+"2" ||
			len(pc.Allow) != 1 || pc.Allow[0].Calling != p+"-allow" ||
			len(pc.Block) != 2 || pc.Block[0].Calling != p+"-b1" || pc.Block[1].Calling != p+"-b2" {
			t.Errorf("policy %s loaded as %+v", p, pc)
		}
	}
	if d := m[callpolicy.DefaultPolicyID]; d.Rules == nil || len(d.Rules) != 0 || d.Allow == nil || d.Block == nil {
		t.Errorf("default policy = %+v, want empty non-nil rules and lists", d)
	}
	arules := m["a"].Rules
	if err := s.DeletePolicy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetRule(ctx, arules[0].ID)
	wantErr(t, err, ErrNotFound, "rule of deleted policy")
	pcs, _ = s.LoadPolicies(ctx)
	m = byID(pcs)
	if _, ok := m["a"]; ok || len(pcs) != 2 || len(m["b"].Rules) != 2 || len(m["b"].Block) != 2 {
		t.Errorf("after cascade: %+v", pcs)
	}
	// the cascade left no orphans behind
	var n int
	if err := s.(*sqlStore).b.queryRow(ctx, `SELECT (SELECT count(*) FROM rules WHERE policy_id = 'a') + (SELECT count(*) FROM list_entries WHERE policy_id = 'a')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d orphan rows of policy a", n)
	}
}

func testCalls(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	base := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	mk := func(i int, calling, called, tcg, tcd, decision, policy string) CallRecord {
		return CallRecord{Time: base.Add(time.Duration(i) * time.Second), Policy: policy, Calling: calling, Called: called,
			TransformedCalling: tcg, TransformedCalled: tcd, TriggerPoint: "ingress", DeviceName: "SEP1",
			Decision: decision, Step: "rule", RuleID: int64(i), EntryID: 7, LatencyMicros: 42, Client: "10.0.0.1"}
	}
	calls := []CallRecord{
		mk(0, "111", "222", "", "", "permit", "default"),
		mk(1, "333", "111", "", "", "deny", "default"),
		mk(2, "444", "555", "111", "", "permit", "sales"),
		mk(3, "444", "555", "", "111", "divert", "sales"),
		mk(4, "999", "888", "", "", "permit", "sales"),
	}
	if err := s.InsertCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertCalls(ctx, nil); err != nil {
		t.Fatal(err)
	}
	ids := func(rs []CallRecord) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.RuleID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    CallQuery
		want []int64
	}{
		{"all newest first", CallQuery{}, []int64{4, 3, 2, 1, 0}},
		{"number in any field", CallQuery{Number: "111"}, []int64{3, 2, 1, 0}},
		{"number exact", CallQuery{Number: "11"}, nil},
		{"decision", CallQuery{Decision: "permit"}, []int64{4, 2, 0}},
		{"policy", CallQuery{Policy: "sales"}, []int64{4, 3, 2}},
		{"since until", CallQuery{Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, []int64{2, 1}},
		{"combined", CallQuery{Number: "444", Decision: "divert", Policy: "sales"}, []int64{3}},
		{"limit", CallQuery{Limit: 2}, []int64{4, 3}},
	} {
		got, err := s.SearchCalls(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(ids(got), c.want) {
			t.Errorf("%s: rule ids %v, want %v", c.name, ids(got), c.want)
		}
	}
	got, _ := s.SearchCalls(ctx, CallQuery{Number: "999"})
	want := calls[4]
	if len(got) != 1 || got[0].ID == 0 {
		t.Fatalf("search 999: %+v", got)
	}
	want.ID = got[0].ID
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("record round trip:\n got %+v\nwant %+v", got[0], want)
	}
	if _, err := s.SearchCalls(ctx, CallQuery{Limit: -1}); err == nil {
		t.Error("negative limit accepted")
	}

	// default limit 100, cap 10000
	many := make([]CallRecord, MaxCallQueryLimit+50)
	for i := range many {
		many[i] = mk(10+i, "5000", "6000", "", "", "permit", "bulk")
	}
	if err := s.InsertCalls(ctx, many); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SearchCalls(ctx, CallQuery{Policy: "bulk"}); len(got) != DefaultCallQueryLimit {
		t.Errorf("default limit: %d rows", len(got))
	}
	if got, _ := s.SearchCalls(ctx, CallQuery{Policy: "bulk", Limit: 1 << 30}); len(got) != MaxCallQueryLimit {
		t.Errorf("capped limit: %d rows", len(got))
	}
}

func testPrune(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var calls []CallRecord
	for i := range 100 {
		calls = append(calls, CallRecord{Time: base.Add(time.Duration(i) * time.Minute), Calling: fmt.Sprint(i), Decision: "permit"})
	}
	// two at the same instant: the row limit must break the tie by id
	calls = append(calls, CallRecord{Time: base.Add(99 * time.Minute), Calling: "100", Decision: "permit"})
	if err := s.InsertCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneCalls(ctx, base.Add(30*time.Minute), 0)
	if err != nil || n != 30 {
		t.Fatalf("prune by age: %d, %v; want 30", n, err)
	}
	n, err = s.PruneCalls(ctx, time.Time{}, 10)
	if err != nil || n != 61 {
		t.Fatalf("prune by rows: %d, %v; want 61", n, err)
	}
	got, _ := s.SearchCalls(ctx, CallQuery{Limit: 1000})
	if len(got) != 10 || got[0].Calling != "100" || got[9].Calling != "91" {
		t.Errorf("kept %d rows, newest %q oldest %q; want 10 from 100 to 91", len(got), got[0].Calling, got[len(got)-1].Calling)
	}
	n, err = s.PruneCalls(ctx, time.Time{}, 10)
	if err != nil || n != 0 {
		t.Errorf("prune within limits: %d, %v", n, err)
	}
}

// specOps are the CRUD methods of one table of named JSON specs.
type specOps struct {
	kind   string
	create func(Store, *SpecRecord) error
	get    func(Store, string) (SpecRecord, error)
	update func(Store, *SpecRecord) error
	list   func(Store) ([]SpecRecord, error)
	delete func(Store, string) error
}

var (
	feedOps = specOps{"feed",
		func(s Store, r *SpecRecord) error { return s.CreateFeed(ctx, r) },
		func(s Store, n string) (SpecRecord, error) { return s.GetFeed(ctx, n) },
		func(s Store, r *SpecRecord) error { return s.UpdateFeed(ctx, r) },
		func(s Store) ([]SpecRecord, error) { return s.ListFeeds(ctx) },
		func(s Store, n string) error { return s.DeleteFeed(ctx, n) }}
	webhookOps = specOps{"webhook",
		func(s Store, r *SpecRecord) error { return s.CreateWebhook(ctx, r) },
		func(s Store, n string) (SpecRecord, error) { return s.GetWebhook(ctx, n) },
		func(s Store, r *SpecRecord) error { return s.UpdateWebhook(ctx, r) },
		func(s Store) ([]SpecRecord, error) { return s.ListWebhooks(ctx) },
		func(s Store, n string) error { return s.DeleteWebhook(ctx, n) }}
	traceOps = specOps{"trace",
		func(s Store, r *SpecRecord) error { return s.CreateTrace(ctx, r) },
		func(s Store, n string) (SpecRecord, error) { return s.GetTrace(ctx, n) },
		func(s Store, r *SpecRecord) error { return s.UpdateTrace(ctx, r) },
		func(s Store) ([]SpecRecord, error) { return s.ListTraces(ctx) },
		func(s Store, n string) error { return s.DeleteTrace(ctx, n) }}
)

func testFeeds(t *testing.T, h backendHarness)    { testSpecs(t, h, feedOps) }
func testWebhooks(t *testing.T, h backendHarness) { testSpecs(t, h, webhookOps) }
func testTraces(t *testing.T, h backendHarness)   { testSpecs(t, h, traceOps) }

func testSpecs(t *testing.T, h backendHarness, o specOps) {
	s := openT(t, h.fresh(t))
	spec := json.RawMessage(`{"source": {"topic": "scp"}, "sink": {"type": "pcap", "addr": "127.0.0.1:9000"}}`)
	f := SpecRecord{Name: "probe1", Spec: spec}
	bumps(t, s, 1, "create "+o.kind, func() error { return o.create(s, &f) })
	wantErr(t, o.create(s, &SpecRecord{Name: "probe1", Spec: json.RawMessage(`{}`)}), ErrConflict, "duplicate "+o.kind)
	if err := o.create(s, &SpecRecord{Name: "bad", Spec: json.RawMessage(`{"x":`)}); err == nil {
		t.Error("invalid JSON spec accepted")
	}
	if err := o.create(s, &SpecRecord{Spec: spec}); err == nil {
		t.Error("empty name accepted")
	}
	got, err := o.get(s, "probe1")
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Errorf("get %s = %+v, %v; want %+v", o.kind, got, err, f)
	}
	f.Spec = json.RawMessage(`{"v":2}`)
	bumps(t, s, 1, "update "+o.kind, func() error { return o.update(s, &f) })
	got, _ = o.get(s, "probe1")
	if string(got.Spec) != `{"v":2}` || !got.CreatedAt.Equal(f.CreatedAt) {
		t.Errorf("after update: %+v", got)
	}
	wantErr(t, o.update(s, &SpecRecord{Name: "nope", Spec: spec}), ErrNotFound, "update missing "+o.kind)
	if err := o.create(s, &SpecRecord{Name: "a", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	list, _ := o.list(s)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "probe1" {
		t.Errorf("list %ss: %+v", o.kind, list)
	}
	bumps(t, s, 1, "delete "+o.kind, func() error { return o.delete(s, "a") })
	wantErr(t, o.delete(s, "a"), ErrNotFound, "delete "+o.kind+" again")
	_, err = o.get(s, "a")
	wantErr(t, err, ErrNotFound, "get deleted "+o.kind)
}

func testTokens(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	tk := Token{ID: "t1", Name: "ci", Role: "admin", Hash: strings.Repeat("ab", 32)}
	bumps(t, s, 1, "create token", func() error { return s.CreateToken(ctx, &tk) })
	if tk.CreatedAt.IsZero() {
		t.Error("created_at not set")
	}
	wantErr(t, s.CreateToken(ctx, &Token{ID: "t1", Hash: "other"}), ErrConflict, "duplicate token id")
	wantErr(t, s.CreateToken(ctx, &Token{ID: "t2", Hash: tk.Hash}), ErrConflict, "duplicate token hash")
	if err := s.CreateToken(ctx, &Token{ID: "t3"}); err == nil {
		t.Error("token without hash accepted")
	}
	got, err := s.TokenByHash(ctx, tk.Hash)
	if err != nil || !reflect.DeepEqual(got, tk) {
		t.Errorf("by hash = %+v, %v; want %+v", got, err, tk)
	}
	_, err = s.TokenByHash(ctx, "cd")
	wantErr(t, err, ErrNotFound, "unknown hash")
	v := Token{ID: "t2", Name: "dash", Role: "viewer", Hash: "ff"}
	if err := s.CreateToken(ctx, &v); err != nil {
		t.Fatal(err)
	}
	list, _ := s.ListTokens(ctx)
	if len(list) != 2 || list[0].ID != "t1" || list[1].ID != "t2" {
		t.Errorf("list tokens: %+v", list)
	}
	bumps(t, s, 1, "delete token", func() error { return s.DeleteToken(ctx, "t1") })
	wantErr(t, s.DeleteToken(ctx, "t1"), ErrNotFound, "delete token again")
	_, err = s.TokenByHash(ctx, tk.Hash)
	wantErr(t, err, ErrNotFound, "deleted token by hash")
}

func testSessions(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	at := time.Now().UTC()
	old := Session{Hash: "aa", Subject: "u1", Name: "old", Role: "viewer", CSRF: "c0", ExpiresAt: at.Add(-time.Second)}
	se := Session{Hash: strings.Repeat("ab", 32), Subject: "u1", Name: "alice@example.net", Role: "admin", CSRF: "c1",
		ExpiresAt: at.Add(time.Hour)}
	bumps(t, s, 0, "create session", func() error { return s.CreateSession(ctx, &old) })
	bumps(t, s, 0, "create session", func() error { return s.CreateSession(ctx, &se) })
	if se.CreatedAt.IsZero() {
		t.Error("created_at not set")
	}
	wantErr(t, s.CreateSession(ctx, &Session{Hash: se.Hash, Subject: "u2", Role: "viewer", ExpiresAt: se.ExpiresAt}), ErrConflict, "duplicate session")
	if err := s.CreateSession(ctx, &Session{Hash: "bb", Subject: "u3"}); err == nil {
		t.Error("session without role and expiry accepted")
	}
	got, err := s.SessionByHash(ctx, se.Hash, at)
	if err != nil || !reflect.DeepEqual(got, se) {
		t.Errorf("by hash = %+v, %v; want %+v", got, err, se)
	}
	_, err = s.SessionByHash(ctx, se.Hash, se.ExpiresAt)
	wantErr(t, err, ErrNotFound, "session at its expiry")
	_, err = s.SessionByHash(ctx, "aa", at.Add(-time.Hour))
	wantErr(t, err, ErrNotFound, "expired session, deleted by the next create")
	bumps(t, s, 0, "delete session", func() error { return s.DeleteSession(ctx, se.Hash) })
	wantErr(t, s.DeleteSession(ctx, se.Hash), ErrNotFound, "delete session again")
	_, err = s.SessionByHash(ctx, se.Hash, at)
	wantErr(t, err, ErrNotFound, "deleted session")
}

func testChanges(t *testing.T, h backendHarness) {
	o := h.fresh(t)
	s1 := openT(t, o)
	s2 := openT(t, o)
	cctx, cancel := context.WithCancel(ctx)
	ch := s1.Changes(cctx)
	if h.name == "postgres" {
		if err := s2.CreatePolicy(ctx, &callpolicy.Policy{ID: "x", Name: "x", DefaultAction: callpolicy.Action{Decision: "permit"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("changes closed early")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no change signal after a write by a second store")
		}
		// Coalesced: many writes leave at most one pending signal, and the
		// writer never blocks on a reader that is not reading.
		for i := range 5 {
			if err := s2.UpdatePolicy(ctx, &callpolicy.Policy{ID: "x", Name: fmt.Sprint(i), DefaultAction: callpolicy.Action{Decision: "permit"}}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no change signal after updates")
		}
		// A lost listener connection reconnects, and says so: changes made
		// while it was away would otherwise go unnoticed.
		var killed int
		if err := s2.(*sqlStore).b.queryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND usename = current_user AND query = 'LISTEN signalbox_config'`).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed == 0 {
			t.Fatal("no listener connection found")
		}
		select {
		case <-ch:
		case <-time.After(15 * time.Second):
			t.Fatal("no signal after the listener reconnected")
		}
		if err := s2.DeletePolicy(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(15 * time.Second):
			t.Fatal("no change signal after reconnect")
		}
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("changes channel not closed after ctx end")
		}
	}
}

// testBulkRules runs a mid-size bulk replace and load through both paths and
// reports the time; BenchmarkReplaceRules100k measures the full size.
func testBulkRules(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	const n = 5000
	rules := genRules(n)
	start := time.Now()
	if err := s.ReplaceRules(ctx, callpolicy.DefaultPolicyID, rules, nil); err != nil {
		t.Fatal(err)
	}
	tReplace := time.Since(start)
	start = time.Now()
	pcs, err := s.LoadPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tLoad := time.Since(start)
	t.Logf("%s: ReplaceRules %d: %v, LoadPolicies: %v", h.name, n, tReplace, tLoad)
	got := pcs[0].Rules
	if len(got) != n {
		t.Fatalf("loaded %d rules, want %d", len(got), n)
	}
	for i := range got {
		if got[i].Priority != i || got[i].Match.Called != rules[i].Match.Called || got[i].Action.Decision != rules[i].Action.Decision {
			t.Fatalf("rule %d: %+v, want %+v", i, got[i], rules[i])
		}
	}
}

func genRules(n int) []callpolicy.Rule {
	rules := make([]callpolicy.Rule, n)
	for i := range rules {
		rules[i] = callpolicy.Rule{Priority: i, Enabled: i%7 != 0,
			Match:       callpolicy.Match{Called: fmt.Sprintf("prefix:+1%09d", i)},
			Action:      callpolicy.Action{Decision: callpolicy.Deny, Reason: "blocked"},
			Description: "imported"}
		if i%10 == 0 {
			rules[i].Action = callpolicy.Action{Decision: callpolicy.Divert, Destination: "+4930100", Modify: &callpolicy.Modify{CallingName: "x"}}
			rules[i].Tags = []string{"import"}
		}
	}
	return rules
}
