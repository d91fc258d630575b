package api

import (
	"context"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

func TestEvaluateHasNoSideEffects(t *testing.T) {
	e := newEnv(t)
	// One call per minute per calling number: a counted evaluation would
	// trip the limit on the second call.
	e.must(201, "POST", "/api/v1/policies", `{"id":"tdos","rate_limit":{"per_calling":{"calls":1,"window_seconds":60}}}`)
	var rule callpolicy.Rule
	e.must(201, "POST", "/api/v1/policies/tdos/rules", `{"priority":1,"match":{"called":"prefix:1900"},"action":{"decision":"deny","reason":"blocked"}}`).decode(t, &rule)

	v := e.configVersion()
	changes := e.changeCount()
	cases := []struct {
		name, body string
		decision   string
		step       callpolicy.Step
		ruleID     int64
	}{
		{"rule match", `{"calling":"4155550100","called":"19005551234"}`, callpolicy.Deny, callpolicy.StepRule, rule.ID},
		{"default", `{"calling":"4155550100","called":"2000","trigger_point":"1","device_name":"SEP001122334455"}`, callpolicy.Permit, callpolicy.StepDefault, 0},
		{"default again, not rate limited", `{"calling":"4155550100","called":"2000"}`, callpolicy.Permit, callpolicy.StepDefault, 0},
		{"and again", `{"calling":"4155550100","called":"2001","transformed_calling":"+14155550100","transformed_called":"2001"}`, callpolicy.Permit, callpolicy.StepDefault, 0},
	}
	for _, c := range cases {
		var res struct {
			Policy   string              `json:"policy"`
			Decision callpolicy.Decision `json:"decision"`
		}
		e.must(200, "POST", "/api/v1/policies/tdos/evaluate", c.body).decode(t, &res)
		if res.Policy != "tdos" || res.Decision.Action.Decision != c.decision || res.Decision.Step != c.step || res.Decision.RuleID != c.ruleID {
			t.Errorf("%s: %+v", c.name, res)
		}
	}
	ctx := context.Background()
	got, err := e.st.GetRule(ctx, rule.ID)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := e.st.SearchCalls(ctx, store.CallQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Hits != 0 || len(calls) != 0 || e.configVersion() != v || e.changeCount() != changes {
		t.Errorf("dry run had effects: hits %d, %d calls logged, version %d→%d, OnChange %d", got.Hits, len(calls), v, e.configVersion(), e.changeCount()-changes)
	}

	e.must(404, "POST", "/api/v1/policies/nope/evaluate", `{"calling":"1"}`)
	e.must(400, "POST", "/api/v1/policies/tdos/evaluate", `{"calling":"1","callingParty":"2"}`)
	e.must(400, "POST", "/api/v1/policies/tdos/evaluate", `{"calling":1}`)
}

func TestEvaluateWithoutEngine(t *testing.T) {
	e := newEnv(t)
	h, err := New(Config{Store: e.st, AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(h, "POST", "/api/v1/policies/default/evaluate", `{"calling":"1"}`)
	if rec.Code != 503 {
		t.Errorf("evaluate without an engine: %d %s", rec.Code, rec.Body)
	}
}
