package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

func scanAll(t *testing.T, s Store, id string) (directory.Directory, []string) {
	t.Helper()
	var out []string
	d, err := s.ScanDirectoryEntries(ctx, id, func(number, name string, prefix bool) error {
		out = append(out, fmt.Sprintf("%s/%v=%s", number, prefix, name))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, out
}

func testDirectories(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	d := directory.Directory{ID: "corp", Name: "Corporate", FallbackName: "Outside"}
	bumps(t, s, 1, "create directory", func() error { return s.CreateDirectory(ctx, &d) })
	if d.Version != version(t, s) || d.Entries != 0 {
		t.Errorf("created: %+v, config version %d", d, version(t, s))
	}
	wantErr(t, s.CreateDirectory(ctx, &directory.Directory{ID: "corp", Name: "x"}), ErrConflict, "duplicate directory")
	_, err := s.GetDirectory(ctx, "nope")
	wantErr(t, err, ErrNotFound, "get missing directory")
	_, err = s.PutDirectoryEntries(ctx, "nope", []directory.Entry{{Number: "1", Name: "A", Match: directory.Exact}})
	wantErr(t, err, ErrNotFound, "entries of a missing directory")

	e := func(num, name, match string) directory.Entry {
		return directory.Entry{Number: num, Name: name, Match: match}
	}
	ch, err := s.PutDirectoryEntries(ctx, "corp", []directory.Entry{
		e("+19725550100", "Front desk", directory.Exact), e("+1972555", "Acme Corp", directory.Prefix), e("2001", "Alice", directory.Exact)})
	if err != nil || !sameChange(ch, DirectoryChange{Added: 3, Entries: 3}) {
		t.Fatalf("put: %+v %v", ch, err)
	}
	ch, err = s.PutDirectoryEntries(ctx, "corp", []directory.Entry{e("2001", "Alice B.", directory.Exact), e("2001", "Alice range", directory.Prefix), e("+1972555", "Acme Corp", directory.Prefix)})
	if err != nil || !sameChange(ch, DirectoryChange{Added: 1, Changed: 1, Unchanged: 1, Entries: 4}) {
		t.Fatalf("put again: %+v %v", ch, err)
	}
	got, all := scanAll(t, s, "corp")
	want := []string{"+19725550100/false=Front desk", "2001/false=Alice B.", "+1972555/true=Acme Corp", "2001/true=Alice range"}
	if strings.Join(all, "|") != strings.Join(want, "|") || got.Entries != 4 || got.Version != version(t, s) {
		t.Errorf("scan: %v (%+v), want %v", all, got, want)
	}

	// Replacing writes only the difference.
	before := version(t, s)
	ch, err = s.ReplaceDirectoryEntries(ctx, "corp", []directory.Entry{
		e("3000", "Bob", directory.Exact), e("2001", "Alice B.", directory.Exact), e("+1972555", "Acme Inc", directory.Prefix)})
	if err != nil || !sameChange(ch, DirectoryChange{Added: 1, Changed: 1, Removed: 2, Unchanged: 1, Entries: 3}) {
		t.Fatalf("replace: %+v %v", ch, err)
	}
	if len(ch.Upserted) != 2 || ch.Upserted[0].Number != "3000" || ch.Upserted[1].Name != "Acme Inc" || len(ch.Deleted) != 2 ||
		ch.Rewritten || ch.Version != before+1 {
		t.Errorf("replace says it wrote %+v", ch)
	}
	got, all = scanAll(t, s, "corp")
	want = []string{"2001/false=Alice B.", "3000/false=Bob", "+1972555/true=Acme Inc"}
	if strings.Join(all, "|") != strings.Join(want, "|") || got.Version != before+1 {
		t.Errorf("after replace: %v version %d, want %v version %d", all, got.Version, want, before+1)
	}
	ch, err = s.ReplaceDirectoryEntries(ctx, "corp", []directory.Entry{e("3000", "Bob", directory.Exact), e("2001", "Alice B.", directory.Exact), e("+1972555", "Acme Inc", directory.Prefix)})
	if err != nil || !sameChange(ch, DirectoryChange{Unchanged: 3, Entries: 3}) {
		t.Errorf("replace with the same: %+v %v", ch, err)
	}

	// Search: a number prefix, a name substring (any case, % literal), paging.
	for _, q := range []struct {
		q    DirectoryQuery
		want string
	}{
		{DirectoryQuery{Number: "+1"}, "+1972555"},
		{DirectoryQuery{Number: "2"}, "2001"},
		{DirectoryQuery{Name: "ALICE"}, "2001"},
		{DirectoryQuery{Name: "%"}, ""},
		{DirectoryQuery{Limit: 2}, "2001,3000"},
		{DirectoryQuery{After: &directory.Key{Number: "2001"}}, "3000,+1972555"},
		{DirectoryQuery{After: &directory.Key{Number: "3000"}}, "+1972555"},
		{DirectoryQuery{After: &directory.Key{Number: "+1", Prefix: true}}, "+1972555"},
		{DirectoryQuery{After: &directory.Key{Number: "+1972555", Prefix: true}}, ""},
	} {
		res, err := s.SearchDirectoryEntries(ctx, "corp", q.q)
		var nums []string
		for _, r := range res {
			nums = append(nums, r.Number)
		}
		if err != nil || strings.Join(nums, ",") != q.want {
			t.Errorf("search %+v: %v %v, want %s", q.q, nums, err, q.want)
		}
	}

	// Deleting by key: all or none.
	_, err = s.DeleteDirectoryEntries(ctx, "corp", []directory.Key{{Number: "3000"}, {Number: "9999"}})
	wantErr(t, err, ErrNotFound, "delete a missing entry")
	if ch, err = s.DeleteDirectoryEntries(ctx, "corp", []directory.Key{{Number: "3000"}}); err != nil || ch.Removed != 1 || ch.Entries != 2 {
		t.Errorf("delete: %+v %v", ch, err)
	}

	d.Name, d.FallbackName = "Corp directory", ""
	if err := s.UpdateDirectory(ctx, &d); err != nil || d.Entries != 2 || d.Version != version(t, s) {
		t.Errorf("update: %+v %v", d, err)
	}

	// A directory a rule or a policy reads cannot be deleted.
	r := callpolicy.Rule{PolicyID: "default", Enabled: true, Action: callpolicy.Action{Decision: callpolicy.Permit,
		Modify: &callpolicy.Modify{CallingName: "directory:corp"}}}
	if err := s.CreateRule(ctx, &r); err != nil {
		t.Fatal(err)
	}
	err = s.DeleteDirectory(ctx, "corp")
	wantErr(t, err, ErrInUse, "delete a directory in use")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`rule %d of policy "default"`, r.ID)) {
		t.Errorf("in-use error names the rule: %v", err)
	}
	if err := s.DeleteRule(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDirectory(ctx, "corp"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetDirectory(ctx, "corp"); err == nil {
		t.Error("deleted directory still there")
	}
	if ds, err := s.ListDirectories(ctx); err != nil || len(ds) != 0 {
		t.Errorf("list after delete: %v %v", ds, err)
	}
}

func testListActions(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	p := callpolicy.Policy{ID: "p", Name: "P", DefaultAction: callpolicy.Action{Decision: callpolicy.Permit},
		BlockAction: &callpolicy.Action{Decision: callpolicy.Deny, Announce: "call_rejected"},
		RateLimit: &callpolicy.RateLimit{PerCalled: &callpolicy.Limit{Calls: 5, WindowSeconds: 60, BlockSeconds: 30,
			Action: &callpolicy.Action{Decision: callpolicy.Divert, Destination: "8000"}}}}
	if err := s.CreatePolicy(ctx, &p); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPolicy(ctx, "p")
	if err != nil || got.AllowAction != nil || got.BlockAction == nil || got.BlockAction.Announce != "call_rejected" ||
		got.RateLimit.PerCalled.Action.Destination != "8000" || got.RateLimit.PerCalled.BlockSeconds != 30 {
		t.Fatalf("policy: %+v %v", got, err)
	}
	got.AllowAction, got.BlockAction = &callpolicy.Action{Decision: callpolicy.Permit, Greeting: "vip"}, nil
	if err := s.UpdatePolicy(ctx, &got); err != nil {
		t.Fatal(err)
	}
	es := []callpolicy.ListEntry{{Calling: "1"}, {Calling: "2", Action: &callpolicy.Action{Decision: callpolicy.Divert, Destination: "9000"}}}
	if err := s.AddEntries(ctx, "p", callpolicy.BlockList, es); err != nil {
		t.Fatal(err)
	}
	cfgs, err := s.LoadPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		if c.Policy.ID != "p" {
			continue
		}
		if c.Policy.BlockAction != nil || c.Policy.AllowAction == nil || c.Policy.AllowAction.Greeting != "vip" ||
			len(c.Block) != 2 || c.Block[0].Action != nil || c.Block[1].Action == nil || c.Block[1].Action.Destination != "9000" {
			t.Errorf("loaded: %+v", c)
		}
		return
	}
	t.Error("policy p not loaded")
}

func testSharedLists(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	l := callpolicy.SharedList{ID: "fraud", Name: "Fraud", Kind: callpolicy.BlockList, Policies: []string{"default"},
		Action: &callpolicy.Action{Decision: callpolicy.Divert, Destination: "8000"}}
	bumps(t, s, 1, "create shared list", func() error { return s.CreateSharedList(ctx, &l) })
	wantErr(t, s.CreateSharedList(ctx, &callpolicy.SharedList{ID: "fraud", Name: "x", Kind: callpolicy.GroupList}), ErrConflict, "duplicate")
	es := []callpolicy.ListEntry{{Calling: "prefix:+1900"}, {Calling: "+1555", Note: "n", Action: &callpolicy.Action{Decision: callpolicy.Deny}}}
	if err := s.AddSharedEntries(ctx, "fraud", es); err != nil || es[0].ID == 0 || es[1].ListID != "fraud" {
		t.Fatalf("add: %+v %v", es, err)
	}
	wantErr(t, s.AddSharedEntries(ctx, "nope", es[:1]), ErrNotFound, "add to a missing list")
	cfg, err := s.LoadSharedList(ctx, "fraud")
	if err != nil || cfg.List.Entries != 2 || cfg.List.Version != version(t, s) || len(cfg.Entries) != 2 ||
		cfg.Entries[1].Action == nil || cfg.List.Policies[0] != "default" || cfg.List.Action.Destination != "8000" {
		t.Fatalf("load: %+v %v", cfg, err)
	}
	l.Kind = callpolicy.AllowList
	wantErr(t, s.UpdateSharedList(ctx, &l), ErrConflict, "kind change")
	l.Kind, l.Policies, l.Action = callpolicy.BlockList, nil, nil
	if err := s.UpdateSharedList(ctx, &l); err != nil || l.Entries != 2 {
		t.Fatalf("update: %+v %v", l, err)
	}
	if got, err := s.GetSharedList(ctx, "fraud"); err != nil || got.Policies != nil || got.Action != nil {
		t.Errorf("after update: %+v %v", got, err)
	}
	if err := s.DeleteSharedEntry(ctx, "fraud", es[0].ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeleteSharedEntry(ctx, "fraud", es[0].ID), ErrNotFound, "delete twice")
	// Groups in use by a rule or another group are not deleted.
	g := callpolicy.SharedList{ID: "board", Name: "Board", Kind: callpolicy.GroupList}
	vip := callpolicy.SharedList{ID: "vip", Name: "VIP", Kind: callpolicy.GroupList}
	if err := s.CreateSharedList(ctx, &g); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSharedList(ctx, &vip); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSharedEntries(ctx, "vip", []callpolicy.ListEntry{{Calling: "group:board"}}); err != nil {
		t.Fatal(err)
	}
	err = s.DeleteSharedList(ctx, "board")
	wantErr(t, err, ErrInUse, "delete a nested group")
	r := callpolicy.Rule{PolicyID: "default", Enabled: true, Match: callpolicy.Match{Calling: "group:vip"}, Action: callpolicy.Action{Decision: callpolicy.Permit}}
	if err := s.CreateRule(ctx, &r); err != nil {
		t.Fatal(err)
	}
	err = s.DeleteSharedList(ctx, "vip")
	wantErr(t, err, ErrInUse, "delete a group a rule names")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rule %d", r.ID)) {
		t.Errorf("in use: %v", err)
	}
	if err := s.DeleteSharedList(ctx, "fraud"); err != nil {
		t.Fatal(err)
	}
	if ls, err := s.ListSharedLists(ctx); err != nil || len(ls) != 2 {
		t.Errorf("lists: %+v %v", ls, err)
	}
}

func testRateCounts(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	now := time.Now()
	w := int64(time.Minute)
	win := now.UnixNano() - now.UnixNano()%w
	c := func(num string, n int64) callpolicy.LimitCount {
		return callpolicy.LimitCount{Policy: "p", Kind: 0, Number: num, Window: win, WindowLen: w, Count: n}
	}
	if _, err := s.SyncRateCounts(ctx, "a", []callpolicy.LimitCount{c("1", 3), c("2", 1)}, now.Add(-time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncRateCounts(ctx, "b", []callpolicy.LimitCount{c("1", 2)}, now.Add(-time.Hour), now); err != nil {
		t.Fatal(err)
	}
	// Node c sees the sum of a and b; a sees only b's.
	got, err := s.SyncRateCounts(ctx, "c", nil, now.Add(-time.Hour), now)
	sums := map[string]int64{}
	for _, g := range got {
		sums[g.Number] = g.Count
	}
	if err != nil || sums["1"] != 5 || sums["2"] != 1 || len(got) != 2 {
		t.Fatalf("c reads %+v %v", got, err)
	}
	// A count written again replaces the node's own; a block travels.
	up := c("1", 4)
	up.BlockedUntil = now.Add(time.Minute).UnixNano()
	if _, err := s.SyncRateCounts(ctx, "a", []callpolicy.LimitCount{up}, now.Add(-time.Hour), now.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	got, err = s.SyncRateCounts(ctx, "b", nil, now, now.Add(2*time.Millisecond))
	if err != nil || len(got) != 1 || got[0].Number != "1" || got[0].Count != 4 || got[0].BlockedUntil != up.BlockedUntil {
		t.Fatalf("b reads what a changed since: %+v %v", got, err)
	}
	if n, err := s.PruneRateCounts(ctx, now.Add(3*time.Minute)); err != nil || n != 3 {
		t.Errorf("prune: %d %v", n, err)
	}
}

// sameChange compares the counts of two directory changes.
func sameChange(a, b DirectoryChange) bool {
	return a.Added == b.Added && a.Changed == b.Changed && a.Removed == b.Removed && a.Unchanged == b.Unchanged && a.Entries == b.Entries
}

func testAudit(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	for i, a := range []AuditRecord{
		{Time: t0, Actor: "ops", Role: "admin", Action: "create rule", Resource: "policies", Target: "7", Detail: "x=1"},
		{Time: t0.Add(time.Minute), Actor: "ci", TokenID: "tk1", Role: "admin", Action: "create feed", Resource: "feeds", Target: "probe"},
		{Actor: "ops", Role: "admin", Action: "delete token", Resource: "tokens", Target: "tk1"},
	} {
		v := version(t, s)
		if err := s.AppendAudit(ctx, &a); err != nil || a.ID == 0 {
			t.Fatalf("append %d: %v", i, err)
		}
		if version(t, s) != v {
			t.Error("an audit record is not a configuration change")
		}
	}
	all, err := s.SearchAudit(ctx, AuditQuery{})
	if err != nil || len(all) != 3 || all[0].Action != "delete token" || all[2].Detail != "x=1" || !all[2].Time.Equal(t0) {
		t.Fatalf("search: %+v %v", all, err)
	}
	if got, _ := s.SearchAudit(ctx, AuditQuery{Actor: "ops"}); len(got) != 2 {
		t.Errorf("by actor: %+v", got)
	}
	if got, _ := s.SearchAudit(ctx, AuditQuery{Resource: "feeds"}); len(got) != 1 || got[0].TokenID != "tk1" {
		t.Errorf("by resource: %+v", got)
	}
	if got, _ := s.SearchAudit(ctx, AuditQuery{Since: t0.Add(30 * time.Second), Until: t0.Add(2 * time.Minute)}); len(got) != 1 {
		t.Errorf("by time: %+v", got)
	}
	if n, err := s.PruneAudit(ctx, t0.Add(30*time.Minute)); err != nil || n != 2 {
		t.Errorf("prune: %d %v", n, err)
	}
}
