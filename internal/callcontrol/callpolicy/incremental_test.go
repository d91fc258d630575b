package callpolicy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// An incremental change decides every call as compiling the whole new
// rule set does, over several rounds of changes (the delta growing),
// and keeps the hit counters of the rules it keeps.
func TestWithRuleChangesMatchesFullCompile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nextID := int64(1)
	mk := func() Rule {
		id := nextID
		nextID++
		m := Match{}
		switch r.IntN(4) {
		case 0:
			m.Calling = fmt.Sprintf("+1555%03d", r.IntN(200))
		case 1:
			m.Called = fmt.Sprintf("prefix:%d", 1+r.IntN(9))
		case 2:
			m.Calling = fmt.Sprintf("prefix:+1555%d", r.IntN(10))
			m.Called = fmt.Sprintf("%d", 1000+r.IntN(50))
		default:
			m.Called = fmt.Sprintf("pattern:1%dXX", r.IntN(10))
		}
		a := Action{Decision: Deny, Reason: "blocked"}
		if r.IntN(2) == 0 {
			a = Action{Decision: Divert, Destination: fmt.Sprint(5000 + id)}
		}
		return Rule{ID: id, Priority: r.IntN(50), Enabled: r.IntN(10) != 0, Match: m, Action: a, SrcHash: uint64(id) * 0x9e3779b97f4a7c15}
	}
	rules := make([]Rule, 3000)
	for i := range rules {
		rules[i] = mk()
	}
	pol := Policy{ID: "p", DefaultAction: permit()}
	e := mustEngine(t, PolicyConfig{Policy: pol, Rules: slices.Clone(rules)})
	calls := make([]Call, 2000)
	for i := range calls {
		calls[i] = Call{Calling: fmt.Sprintf("+1555%03d", r.IntN(250)), Called: fmt.Sprint(r.IntN(2000))}
	}
	// A hit on a rule that every round keeps.
	keep := rules[0]
	keep.Enabled, keep.Priority, keep.Match = true, -1, Match{Calling: "+19990000"}
	rules[0] = keep
	e = mustEngine(t, PolicyConfig{Policy: pol, Rules: slices.Clone(rules)})
	e.Evaluate("p", &Call{Calling: "+19990000"}, t0)

	for round := range 6 {
		var removed []int64
		var added []Rule
		for i := 1; i < len(rules); i++ {
			if r.IntN(100) < 3 {
				removed = append(removed, rules[i].ID)
				rules[i] = mk()
				added = append(added, rules[i])
			}
		}
		cp, err := e.Snapshot().WithRuleChanges("p", removed, added)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		e.Swap(e.Snapshot().With(cp))
		full := mustEngine(t, PolicyConfig{Policy: pol, Rules: slices.Clone(rules)})
		for _, c := range calls {
			got, _ := e.DryRun("p", &c, t0)
			want, _ := full.DryRun("p", &c, t0)
			if got.Step != want.Step || got.RuleID != want.RuleID || got.Action.Sent() != want.Action.Sent() {
				t.Fatalf("round %d, %+v: incremental %s rule %d %q, full %s rule %d %q", round, c,
					got.Step, got.RuleID, got.Action.Sent(), want.Step, want.RuleID, want.Action.Sent())
			}
		}
		idx, _ := e.Snapshot().RuleIndex("p")
		want := make([]HashID, len(rules))
		for i, rr := range rules {
			want[i] = HashID{Hash: rr.SrcHash, ID: rr.ID}
		}
		slices.SortFunc(want, cmpHashID)
		if !slices.Equal(idx, want) {
			t.Fatalf("round %d: index of %d, want %d entries, sorted", round, len(idx), len(want))
		}
	}
	e.Evaluate("p", &Call{Calling: "+19990000"}, t0)
	if h := e.DrainHits(); h[keep.ID].Count != 2 {
		t.Errorf("the kept rule's hits: %+v", h[keep.ID])
	}
	// A change larger than a tenth of the base is compiled whole.
	var removed []int64
	var added []Rule
	for i := 1; i < 1200; i++ {
		removed = append(removed, rules[i].ID)
		added = append(added, mk())
	}
	if _, err := e.Snapshot().WithRuleChanges("p", removed, added); !errors.Is(err, ErrRebuild) {
		t.Errorf("large change: %v", err)
	}
}
