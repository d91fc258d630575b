package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// The example rule from the issue.
const exampleRule = `{"priority":10,"match":{"calling":"9725550101"},"action":{"decision":"deny","announce":"user_unavailable","reason":"blocked"},"description":"nuisance caller"}`

func TestCreateExampleRule(t *testing.T) {
	e := newEnv(t)
	before := e.changeCount()
	var rule callpolicy.Rule
	e.must(201, "POST", "/api/v1/policies/default/rules", exampleRule).decode(t, &rule)
	if rule.ID <= 0 || rule.PolicyID != "default" || !rule.Enabled || rule.Priority != 10 ||
		rule.Match.Calling != "9725550101" || rule.Action.Decision != callpolicy.Deny ||
		rule.Action.Announce != "user_unavailable" || rule.Description != "nuisance caller" || rule.CreatedAt.IsZero() {
		t.Errorf("created rule = %+v", rule)
	}
	if e.changeCount() != before+1 {
		t.Errorf("OnChange calls = %d, want %d", e.changeCount(), before+1)
	}
	var got callpolicy.Rule
	e.must(200, "GET", fmt.Sprintf("/api/v1/rules/%d", rule.ID), "").decode(t, &got)
	if got.ID != rule.ID || got.Match != rule.Match {
		t.Errorf("GET rule = %+v", got)
	}
	var list struct{ Rules []callpolicy.Rule }
	e.must(200, "GET", "/api/v1/policies/default/rules", "").decode(t, &list)
	if len(list.Rules) != 1 || list.Rules[0].ID != rule.ID {
		t.Errorf("rules = %+v", list.Rules)
	}
	// The engine sees it: a call from that number is denied.
	d, ok := e.engine.DryRun("default", &callpolicy.Call{Calling: "9725550101", Called: "1000"}, e.now())
	if !ok || d.Action.Decision != callpolicy.Deny || d.RuleID != rule.ID {
		t.Errorf("engine after create: %+v %v", d, ok)
	}
}

func TestInvalidRulesChangeNothing(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, path, contentType, body string
		status                        int
		field                         string
		contains                      string
	}{
		{"regex look-ahead", "/api/v1/policies/default/rules", "", `{"match":{"calling":"regex:^\\+(?!1)"},"action":{"decision":"deny"}}`, 400, "match.calling", "match.calling"},
		{"unknown field", "/api/v1/policies/default/rules", "", `{"match":{"calling":"1"},"action":{"decision":"deny"},"colour":"red"}`, 400, "colour", `unknown field "colour"`},
		{"unknown nested field", "/api/v1/policies/default/rules", "", `{"match":{"caller":"1"},"action":{"decision":"deny"}}`, 400, "caller", `unknown field "caller"`},
		{"bad pattern", "/api/v1/policies/default/rules", "", `{"match":{"called":"pattern:9.[2-"},"action":{"decision":"deny"}}`, 400, "match.called", "match.called"},
		{"bad decision", "/api/v1/policies/default/rules", "", `{"action":{"decision":"maybe"}}`, 400, "action.decision", "action.decision"},
		{"wrong type", "/api/v1/policies/default/rules", "", `{"priority":"high","action":{"decision":"deny"}}`, 400, "priority", "priority"},
		{"enabled wrong type", "/api/v1/policies/default/rules", "", `{"enabled":"yes","action":{"decision":"deny"}}`, 400, "enabled", "enabled"},
		{"bad expires_at", "/api/v1/policies/default/rules", "", `{"expires_at":"tomorrow","action":{"decision":"deny"}}`, 400, "", "RFC 3339"},
		{"syntax error", "/api/v1/policies/default/rules", "", `{"action":{"decision":"deny"}`, 400, "", ""},
		{"garbage", "/api/v1/policies/default/rules", "", `decision=deny`, 400, "", "offset"},
		{"empty body", "/api/v1/policies/default/rules", "", ``, 400, "", "empty"},
		{"curl -d default type, not JSON", "/api/v1/policies/default/rules", "application/x-www-form-urlencoded", `a=b`, 400, "", "invalid JSON"},
		{"text content type", "/api/v1/policies/default/rules", "text/plain", exampleRule, 415, "", "application/json"},
		{"other policy in body", "/api/v1/policies/default/rules", "", `{"policy_id":"other","action":{"decision":"deny"}}`, 400, "policy_id", "cannot move"},
		{"unknown policy", "/api/v1/policies/nope/rules", "", exampleRule, 404, "", `policy "nope" not found`},
		{"too large", "/api/v1/policies/default/rules", "", `{"description":"` + strings.Repeat("x", maxBodyBytes) + `","action":{"decision":"deny"}}`, 413, "", "exceeds"},
	}
	v := e.configVersion()
	changes := e.changeCount()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.req("POST", c.path, adminToken, c.contentType, c.body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Body)
			}
			eb := r.errBody(t)
			if eb.Field != c.field {
				t.Errorf("field %q, want %q (error %q)", eb.Field, c.field, eb.Error)
			}
			if !strings.Contains(eb.Error, c.contains) {
				t.Errorf("error %q lacks %q", eb.Error, c.contains)
			}
		})
	}
	rules, err := e.st.ListRules(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 0 || e.configVersion() != v || e.changeCount() != changes {
		t.Errorf("refused input changed something: %d rules, version %d→%d, %d OnChange calls", len(rules), v, e.configVersion(), e.changeCount()-changes)
	}
}

func TestRuleUpdateDelete(t *testing.T) {
	e := newEnv(t)
	var rule callpolicy.Rule
	e.must(201, "POST", "/api/v1/policies/default/rules", `{"priority":5,"enabled":false,"match":{"called":"prefix:900"},"action":{"decision":"deny"}}`).decode(t, &rule)
	if rule.Enabled {
		t.Error(`"enabled":false was stored as true`)
	}
	path := fmt.Sprintf("/api/v1/rules/%d", rule.ID)

	// Omitted enabled on PUT means true, like on POST.
	var upd callpolicy.Rule
	e.must(200, "PUT", path, `{"priority":7,"match":{"called":"prefix:901"},"action":{"decision":"permit"}}`).decode(t, &upd)
	if upd.ID != rule.ID || upd.Priority != 7 || !upd.Enabled || upd.Match.Called != "prefix:901" || !upd.CreatedAt.Equal(rule.CreatedAt) {
		t.Errorf("updated = %+v (was %+v)", upd, rule)
	}
	// A GET body can be PUT back.
	got := e.must(200, "GET", path, "")
	e.must(200, "PUT", path, string(got.Body))

	e.must(400, "PUT", path, fmt.Sprintf(`{"id":%d,"action":{"decision":"deny"}}`, rule.ID+1))
	e.must(400, "PUT", path, `{"match":{"calling":"regex:(?<=a)b"},"action":{"decision":"deny"}}`)
	e.must(404, "PUT", "/api/v1/rules/999999", `{"action":{"decision":"deny"}}`)
	e.must(404, "GET", "/api/v1/rules/abc", "")
	e.must(404, "GET", "/api/v1/rules/-3", "")

	var after callpolicy.Rule
	e.must(200, "GET", path, "").decode(t, &after)
	if after.Match.Called != "prefix:901" {
		t.Errorf("refused PUT changed the rule: %+v", after)
	}

	e.must(204, "DELETE", path, "")
	e.must(404, "DELETE", path, "")
	e.must(404, "GET", path, "")
}

func TestReplaceRules(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "/api/v1/policies/default/rules", exampleRule)

	const n = 2000
	good := make([]map[string]any, n)
	for i := range good {
		good[i] = map[string]any{
			"priority": i,
			"match":    map[string]string{"calling": fmt.Sprintf("+1972555%04d", i), "called": "prefix:9"},
			"action":   map[string]string{"decision": "deny", "reason": "blocked"},
		}
	}
	bad := make([]map[string]any, len(good))
	copy(bad, good)
	bad[123] = map[string]any{"match": map[string]string{"called": "pattern:[9-"}, "action": map[string]string{"decision": "deny"}}

	v := e.configVersion()
	r := e.must(400, "PUT", "/api/v1/policies/default/rules", mustJSON(t, bad))
	eb := r.errBody(t)
	if eb.Field != "rules[123].match.called" || !strings.HasPrefix(eb.Error, "rules[123].match.called: ") {
		t.Errorf("bad index error = %+v", eb)
	}
	if e.configVersion() != v {
		t.Error("refused bulk load bumped the config version")
	}
	rules, _ := e.st.ListRules(context.Background(), "default")
	if len(rules) != 1 {
		t.Fatalf("after refused bulk load: %d rules, want the 1 from before", len(rules))
	}

	// Unknown fields inside the array are refused too.
	e.must(400, "PUT", "/api/v1/policies/default/rules", `[{"action":{"decision":"deny"},"prio":1}]`)
	e.must(400, "PUT", "/api/v1/policies/default/rules", `{"action":{"decision":"deny"}}`)
	e.must(400, "PUT", "/api/v1/policies/default/rules", `null`)
	e.must(404, "PUT", "/api/v1/policies/nope/rules", `[]`)
	// A body that does not decode is refused as such even after an invalid
	// rule; an unknown policy is a 404 whatever its rules say.
	badRule := `{"match":{"called":"pattern:[9-"},"action":{"decision":"deny"}}`
	eb = e.must(400, "PUT", "/api/v1/policies/default/rules", "["+badRule+`,{"priority":"high"}]`).errBody(t)
	if eb.Field == "rules[0].match.called" {
		t.Errorf("a body that does not decode was reported by its invalid rule: %+v", eb)
	}
	e.must(404, "PUT", "/api/v1/policies/nope/rules", "["+badRule+"]")

	var res struct {
		PolicyID string `json:"policy_id"`
		Rules    int    `json:"rules"`
	}
	e.must(200, "PUT", "/api/v1/policies/default/rules", mustJSON(t, good)).decode(t, &res)
	if res.Rules != n || res.PolicyID != "default" {
		t.Errorf("bulk answer = %+v", res)
	}
	rules, _ = e.st.ListRules(context.Background(), "default")
	if len(rules) != n {
		t.Fatalf("after bulk load: %d rules, want %d", len(rules), n)
	}
	d, ok := e.engine.DryRun("default", &callpolicy.Call{Calling: "+19725551999", Called: "911"}, e.now())
	if !ok || d.Step != callpolicy.StepRule || d.RuleID != rules[1999].ID {
		t.Errorf("engine after bulk load: %+v %v", d, ok)
	}
	// An empty array deletes them all.
	e.must(200, "PUT", "/api/v1/policies/default/rules", `[]`)
	if rules, _ = e.st.ListRules(context.Background(), "default"); len(rules) != 0 {
		t.Errorf("after []: %d rules", len(rules))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplaceRulesCompiledWhileStored: with Config.Live set, a bulk
// replacement hands the owner the rules with the ids the store gives them
// before it writes them, reports the commit, and calls no OnChange; the
// owner's compile from those rules decides with the stored rule ids.
func TestReplaceRulesCompiledWhileStored(t *testing.T) {
	type call struct {
		policy string
		ids    []int64
		stored []bool
	}
	var mu sync.Mutex
	var calls []*call
	e := newEnvWith(t, func(e *env, c *Config) {
		c.Live = replacingOnly{onChange: e.onChange, replacing: func(policyID string, rules []callpolicy.Rule) func(bool) {
			cl := &call{policy: policyID}
			for _, r := range rules {
				cl.ids = append(cl.ids, r.ID)
			}
			mu.Lock()
			calls = append(calls, cl)
			mu.Unlock()
			// Compile while the store writes, as the app does.
			type result struct {
				cp  *callpolicy.CompiledPolicy
				err error
			}
			done := make(chan result, 1)
			go func() {
				pol, err := e.st.GetPolicy(context.Background(), policyID)
				if err != nil {
					done <- result{err: err}
					return
				}
				cp, err := callpolicy.CompilePolicy(&callpolicy.PolicyConfig{Policy: pol, Rules: rules}, nil)
				done <- result{cp, err}
			}()
			return func(ok bool) {
				mu.Lock()
				cl.stored = append(cl.stored, ok)
				mu.Unlock()
				res := <-done
				if res.err != nil {
					t.Errorf("compile: %v", res.err)
					return
				}
				if ok {
					e.engine.Swap(e.engine.Snapshot().With(res.cp))
				}
			}
		}}
	})
	rules := make([]map[string]any, 300)
	for i := range rules {
		rules[i] = map[string]any{
			"priority": 1 + i%3,
			"match":    map[string]string{"calling": fmt.Sprintf("+1972555%04d", i)},
			"action":   map[string]string{"decision": "deny", "reason": "blocked"},
		}
	}
	for round := range 2 {
		e.must(200, "PUT", "/api/v1/policies/default/rules", mustJSON(t, rules))
		stored, err := e.st.ListRules(context.Background(), "default")
		if err != nil || len(stored) != len(rules) {
			t.Fatalf("round %d: %d rules stored, err %v", round, len(stored), err)
		}
		mu.Lock()
		cl := calls[len(calls)-1]
		n := len(calls)
		mu.Unlock()
		if n != round+1 || cl.policy != "default" || !slices.Equal(cl.stored, []bool{true}) {
			t.Fatalf("round %d: %d hook calls, last %+v", round, n, cl)
		}
		want := make([]int64, 0, len(stored))
		for _, r := range stored {
			want = append(want, r.ID)
		}
		got := slices.Clone(cl.ids)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: ids handed over %v…, stored %v…", round, got[:3], want[:3])
		}
		d, ok := e.engine.DryRun("default", &callpolicy.Call{Calling: "+19725550042", Called: "911"}, e.now())
		r, err := e.st.GetRule(context.Background(), d.RuleID)
		if !ok || d.Step != callpolicy.StepRule || err != nil || r.Match.Calling != "+19725550042" {
			t.Errorf("round %d: decision %+v names rule %+v (%v)", round, d, r, err)
		}
	}
	e.must(404, "PUT", "/api/v1/policies/nope/rules", `[]`)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Errorf("a refused replacement called the hook: %d calls", len(calls))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if slices.Contains(e.changes, ChangedPolicies) {
		t.Errorf("OnChange called for a bulk replacement: %v", e.changes)
	}
}

// failingReplace is a store whose bulk replacement fails after it has
// handed the rules over, as a write that fails at commit would.
type failingReplace struct{ store.Store }

func (f failingReplace) ReplaceRules(ctx context.Context, policyID string, rules []callpolicy.Rule, idsSet func()) error {
	for i := range rules {
		rules[i].ID = int64(1000 + i)
	}
	if idsSet != nil {
		idsSet()
	}
	return errors.New("disk I/O error")
}

// TestReplaceRulesFailedAfterHandover: when the store fails after handing
// the rules to Config.Live (Replacing), the owner hears stored(false), the client a
// 500, and nothing counts as a change.
func TestReplaceRulesFailedAfterHandover(t *testing.T) {
	var stored []bool
	e := newEnvWith(t, func(e *env, c *Config) {
		c.Store = failingReplace{c.Store}
		c.Live = replacingOnly{onChange: e.onChange, replacing: func(string, []callpolicy.Rule) func(bool) {
			return func(ok bool) { stored = append(stored, ok) }
		}}
	})
	v := e.configVersion()
	e.must(500, "PUT", "/api/v1/policies/default/rules", `[{"priority":1,"action":{"decision":"deny"}}]`)
	if !slices.Equal(stored, []bool{false}) {
		t.Errorf("stored calls %v, want [false]", stored)
	}
	if e.configVersion() != v || len(e.changes) != 0 {
		t.Errorf("a failed replacement changed the config: version %d -> %d, changes %v", v, e.configVersion(), e.changes)
	}
}

// TestReplaceRulesOutcome: a bulk replacement's outcome reaches the
// client: the rules stored, or the error (bad input, unknown policy) with
// nothing changed.
func TestReplaceRulesOutcome(t *testing.T) {
	e := newEnv(t)
	body := `[{"priority":1,"match":{"calling":"+19725550001"},"action":{"decision":"deny"}},
		{"priority":2,"match":{"calling":"+19725550002"},"action":{"decision":"permit"}}]`
	e.must(200, "PUT", "/api/v1/policies/default/rules", body)
	if got, err := e.st.ListRules(context.Background(), "default"); err != nil || len(got) != 2 {
		t.Fatalf("%d rules stored, err %v", len(got), err)
	}
	e.must(400, "PUT", "/api/v1/policies/default/rules", `[{"priority":1,"match":{"calling":"regex:(?!x)"},"action":{"decision":"deny"}}]`)
	e.must(404, "PUT", "/api/v1/policies/nope/rules", body)
	if got, err := e.st.ListRules(context.Background(), "default"); err != nil || len(got) != 2 {
		t.Fatalf("after refused replacements: %d rules, err %v", len(got), err)
	}
}

// replacingOnly is a Config.Live that compiles bulk replacements (the
// replacing hook) and hands every other change to onChange, as the API does
// without one: no incremental replacement.
type replacingOnly struct {
	replacing func(policyID string, rules []callpolicy.Rule) (stored func(ok bool))
	onChange  func(what string)
}

func (r replacingOnly) Replacing(policyID string, rules []callpolicy.Rule) func(bool) {
	return r.replacing(policyID, rules)
}
func (replacingOnly) RuleIndex(string) ([]callpolicy.HashID, int64, bool) { return nil, 0, false }
func (replacingOnly) ChangingRules(string, []int64, []callpolicy.Rule) func(bool) {
	panic("ChangingRules without a rule index")
}
func (r replacingOnly) DirectoryChanged(string, store.DirectoryChange) { r.onChange(ChangedPolicies) }
func (r replacingOnly) ListsChanged(string, string)                    { r.onChange(ChangedPolicies) }
