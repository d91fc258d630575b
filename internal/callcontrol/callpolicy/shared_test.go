package callpolicy

import (
	"strings"
	"testing"
)

func sharedLib(t *testing.T, cfgs ...SharedListConfig) *Library {
	t.Helper()
	var lists []*CompiledList
	for i := range cfgs {
		c, err := CompileSharedList(&cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, c)
	}
	l, err := NewLibrary(nil, lists)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSharedListsAndGroups(t *testing.T) {
	fraud := SharedListConfig{List: SharedList{ID: "fraud", Name: "Known fraud", Kind: BlockList},
		Entries: []ListEntry{{ID: 1, Calling: "prefix:+1900"}, {ID: 2, Calling: "+15551234", Action: &Action{Decision: Divert, Destination: "8000"}}}}
	vipOnly := SharedListConfig{List: SharedList{ID: "execs", Name: "Executives", Kind: AllowList, Policies: []string{"sales"},
		Action: &Action{Decision: Permit, Greeting: "vip"}}, Entries: []ListEntry{{ID: 3, Calling: "+15551234"}}}
	board := SharedListConfig{List: SharedList{ID: "board", Name: "Board", Kind: GroupList}, Entries: []ListEntry{{ID: 4, Calling: "+15550001"}}}
	vip := SharedListConfig{List: SharedList{ID: "vip", Name: "VIP", Kind: GroupList},
		Entries: []ListEntry{{ID: 5, Calling: "prefix:+1212555"}, {ID: 6, Calling: "group:board"}}}
	lib := sharedLib(t, fraud, vipOnly, board, vip)
	if got := strings.Join(lib.Group("vip"), ","); got != "prefix:+1212555,+15550001" {
		t.Fatalf("vip expands to %s", got)
	}
	rules := []Rule{
		{ID: 10, Priority: 1, Enabled: true, Match: Match{Calling: "group:vip", Called: "5000"}, Action: Action{Decision: Divert, Destination: "5001"}},
		{ID: 11, Priority: 2, Enabled: true, Match: Match{Called: "5000"}, Action: Action{Decision: Deny, Reason: "user-busy"}},
	}
	cfgs := []PolicyConfig{
		{Policy: Policy{ID: "default", DefaultAction: permit(), BlockAction: &Action{Decision: Deny, Announce: "fraud"}}, Rules: rules,
			Allow: []ListEntry{{ID: 20, Calling: "+19005550000"}}},
		{Policy: Policy{ID: "sales", DefaultAction: permit()}, Rules: rules},
	}
	s, err := CompileWith(cfgs, lib)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngineSnap(t, s)
	for _, tt := range []struct {
		policy, calling, called string
		step                    Step
		entry, rule             int64
		sent                    string
	}{
		// The shared block list holds in every policy, with the policy's
		// block action unless the entry has its own.
		{"default", "+19001234567", "1", StepBlockList, 1, 0, "reject announce=fraud"},
		{"sales", "+19001234567", "1", StepBlockList, 1, 0, "reject reason=blocked"},
		{"default", "+15551234", "1", StepBlockList, 2, 0, "divert 8000"},
		// The policy's own allow list comes first.
		{"default", "+19005550000", "1", StepAllowList, 20, 0, "continue"},
		// A shared allow list applies only to its policies, before the
		// block lists, with its own action.
		{"sales", "+15551234", "1", StepAllowList, 3, 0, "continue greeting=vip"},
		// Rules match groups, nested ones included, in rank order.
		{"default", "+12125550199", "5000", StepRule, 0, 10, "divert 5001"},
		{"default", "+15550001", "5000", StepRule, 0, 10, "divert 5001"},
		{"default", "+15550002", "5000", StepRule, 0, 11, "reject reason=user-busy"},
	} {
		d, _ := e.Evaluate(tt.policy, &Call{Calling: tt.calling, Called: tt.called}, t0)
		if d.Step != tt.step || d.EntryID != tt.entry || d.RuleID != tt.rule || d.Action.Sent() != tt.sent {
			t.Errorf("%s %s→%s: %s entry %d rule %d %q, want %s %d %d %q", tt.policy, tt.calling, tt.called,
				d.Step, d.EntryID, d.RuleID, d.Action.Sent(), tt.step, tt.entry, tt.rule, tt.sent)
		}
		if tt.entry == 1 && !strings.HasPrefix(d.Reason, "shared block list fraud entry 1") {
			t.Errorf("reason %q", d.Reason)
		}
	}
	// Hits of an expanded rule count once per call.
	hits := e.DrainHits()
	if hits[10].Count != 2 || hits[11].Count != 1 {
		t.Errorf("hits %+v", hits)
	}
}

func TestGroupErrors(t *testing.T) {
	g := func(id string, vals ...string) SharedListConfig {
		c := SharedListConfig{List: SharedList{ID: id, Name: id, Kind: GroupList}}
		for i, v := range vals {
			c.Entries = append(c.Entries, ListEntry{ID: int64(i + 1), Calling: v})
		}
		return c
	}
	compile := func(cfgs ...SharedListConfig) error {
		var lists []*CompiledList
		for i := range cfgs {
			c, err := CompileSharedList(&cfgs[i])
			if err != nil {
				return err
			}
			lists = append(lists, c)
		}
		_, err := NewLibrary(nil, lists)
		return err
	}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"loop", compile(g("a", "1", "group:b"), g("b", "group:c"), g("c", "group:a")), "group loop: "},
		{"self", compile(g("a", "group:a")), "group loop: a → a"},
		{"missing", compile(g("a", "group:nope")), `group "a": calling: group "nope" does not exist`},
		{"bad value", compile(g("a", "x1")), `shared list "a": entry 1: calling:`},
		{"called in group", func() error {
			c := g("a", "1")
			c.Entries[0].Called = "2"
			return compile(c)
		}(), "called: a group entry is one number"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, tt.err, tt.want)
		}
	}

	lib := sharedLib(t, g("big", "1", "2", "3"))
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()},
		Rules: []Rule{{ID: 7, Enabled: true, Match: Match{Calling: "group:nope"}, Action: permit()}}}
	if _, err := CompileWith([]PolicyConfig{cfg}, lib); err == nil || !strings.Contains(err.Error(), `rule 7: match.calling: group "nope" does not exist`) {
		t.Errorf("missing group in a rule: %v", err)
	}
	cfg.Rules[0].Match = Match{TriggerPoint: "group:big"}
	if _, err := CompileWith([]PolicyConfig{cfg}, lib); err != nil {
		t.Errorf("a group of numbers on a text field is exact text: %v", err)
	}
	if err := ValidateRule(&Rule{Enabled: true, Match: Match{Calling: "group:Bad Id"}, Action: permit()}); err == nil {
		t.Error("a bad group id is refused")
	}
	bad := SharedList{ID: "g", Name: "g", Kind: GroupList, Policies: []string{"p"}}
	if err := ValidateSharedList(&bad); err == nil || !strings.HasPrefix(err.Error(), "policies:") {
		t.Errorf("group with policies: %v", err)
	}
}
