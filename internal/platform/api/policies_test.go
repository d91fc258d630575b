package api

import (
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

func TestPoliciesCRUD(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		name, method, path, body string
		status                   int
		contains                 string // in the body
		field                    string // of an error
	}{
		{"list has default", "GET", "/api/v1/policies", "", 200, `"id":"default"`, ""},
		{"create", "POST", "/api/v1/policies", `{"id":"sales","name":"Sales","default_action":{"decision":"permit"}}`, 201, `"id":"sales"`, ""},
		{"create duplicate", "POST", "/api/v1/policies", `{"id":"sales"}`, 409, "already exists", "id"},
		{"create bad slug", "POST", "/api/v1/policies", `{"id":"Sales Team"}`, 400, "not a valid policy id", "id"},
		{"create empty id", "POST", "/api/v1/policies", `{"name":"x"}`, 400, "not a valid policy id", "id"},
		{"create unknown field", "POST", "/api/v1/policies", `{"id":"x","colour":"red"}`, 400, `unknown field \"colour\"`, "colour"},
		{"create wrong type", "POST", "/api/v1/policies", `{"id":"x","name":7}`, 400, "name", "name"},
		{"create bad json", "POST", "/api/v1/policies", `{"id":"x",`, 400, "", ""},
		{"create two values", "POST", "/api/v1/policies", `{"id":"x"} {"id":"y"}`, 400, "exactly one JSON value", ""},
		{"create bad decision", "POST", "/api/v1/policies", `{"id":"x","default_action":{"decision":"maybe"}}`, 400, "", "default_action.decision"},
		{"get", "GET", "/api/v1/policies/sales", "", 200, `"name":"Sales"`, ""},
		{"get missing", "GET", "/api/v1/policies/nope", "", 404, `policy \"nope\" not found`, ""},
		{"update", "PUT", "/api/v1/policies/sales", `{"name":"Sales EMEA","default_action":{"decision":"deny","announce":"user_unavailable"}}`, 200, `"name":"Sales EMEA"`, ""},
		{"update rename refused", "PUT", "/api/v1/policies/sales", `{"id":"other","name":"x"}`, 400, "cannot be renamed", "id"},
		{"update missing", "PUT", "/api/v1/policies/nope", `{"name":"x"}`, 404, "not found", ""},
		{"get updated", "GET", "/api/v1/policies/sales", "", 200, `"decision":"deny"`, ""},
		{"delete default refused", "DELETE", "/api/v1/policies/default", "", 409, "cannot be deleted", "id"},
		{"delete", "DELETE", "/api/v1/policies/sales", "", 204, "", ""},
		{"delete again", "DELETE", "/api/v1/policies/sales", "", 404, "not found", ""},
		{"gone", "GET", "/api/v1/policies/sales", "", 404, "", ""},
	}
	for _, s := range steps {
		r := e.admin(s.method, s.path, s.body)
		if r.Status != s.status {
			t.Fatalf("%s: status %d, want %d; body %s", s.name, r.Status, s.status, r.Body)
		}
		if !strings.Contains(string(r.Body), s.contains) {
			t.Errorf("%s: body %s lacks %q", s.name, r.Body, s.contains)
		}
		if s.status >= 400 {
			if eb := r.errBody(t); eb.Field != s.field || eb.Error == "" {
				t.Errorf("%s: error %+v, want field %q", s.name, eb, s.field)
			}
		}
	}
}

func TestPolicyRoundTripAndDefaults(t *testing.T) {
	e := newEnv(t)
	var p callpolicy.Policy
	e.must(201, "POST", "/api/v1/policies", `{"id":"lab"}`).decode(t, &p)
	if p.Name != "lab" || p.DefaultAction.Decision != callpolicy.Permit || p.CreatedAt.IsZero() {
		t.Errorf("defaults: %+v", p)
	}
	// A GET body can be PUT back unchanged (read-only fields are ignored).
	got := e.must(200, "GET", "/api/v1/policies/lab", "")
	var back callpolicy.Policy
	e.must(200, "PUT", "/api/v1/policies/lab", string(got.Body)).decode(t, &back)
	if !back.CreatedAt.Equal(p.CreatedAt) || back.Name != "lab" {
		t.Errorf("after round trip: %+v, was %+v", back, p)
	}
	changes := e.changeCount()
	v := e.configVersion()
	// Refused writes change nothing.
	e.must(400, "PUT", "/api/v1/policies/lab", `{"default_action":{"decision":"explode"}}`)
	if e.changeCount() != changes || e.configVersion() != v {
		t.Error("a refused update changed the configuration")
	}
}

// TestPatchPolicy: PATCH (RFC 7396 merge patch) changes what it names and
// keeps the rest, where PUT replaces the whole policy: a UC administrator's
// TDoS limits survive a later change of the policy's default action.
func TestPatchPolicy(t *testing.T) {
	e := newEnv(t)
	e.must(200, "PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit"},
		"block_action":{"decision":"divert","destination":"8000","reason":"chaperone"},
		"rate_limit":{"per_calling":{"calls":5,"window_seconds":60},"overall":{"calls":500,"window_seconds":60}}}`)
	var p callpolicy.Policy
	e.must(200, "PATCH", "/api/v1/policies/default", `{"default_action":{"modify":{"calling_name":"Acme"}},
		"rate_limit":{"per_calling":{"calls":7}}}`).decode(t, &p)
	if p.DefaultAction.Decision != callpolicy.Permit || p.DefaultAction.Modify == nil || p.DefaultAction.Modify.CallingName != "Acme" {
		t.Errorf("default action after the patch: %+v", p.DefaultAction)
	}
	if p.BlockAction == nil || p.BlockAction.Destination != "8000" || p.RateLimit == nil || p.RateLimit.Overall == nil ||
		p.RateLimit.Overall.Calls != 500 || p.RateLimit.PerCalling == nil || p.RateLimit.PerCalling.Calls != 7 ||
		p.RateLimit.PerCalling.WindowSeconds != 60 {
		t.Errorf("what the patch did not name changed: block %+v, limits %+v", p.BlockAction, p.RateLimit)
	}
	// null removes a setting.
	var q callpolicy.Policy
	e.must(200, "PATCH", "/api/v1/policies/default", `{"block_action":null}`).decode(t, &q)
	if q.BlockAction != nil || q.RateLimit == nil {
		t.Errorf("after removing block_action: block %+v, limits %+v", q.BlockAction, q.RateLimit)
	}
	changes := e.changeCount()
	for _, c := range []struct{ body, want string }{
		{`{"id":"sales"}`, "cannot be renamed"},
		{`{"default_action":{"decision":"explode"}}`, "default_action.decision"},
		{`{"colour":"red"}`, "colour"},
		{`[1,2]`, "JSON object"},
		{`{"name":`, ""},
	} {
		if r := e.admin("PATCH", "/api/v1/policies/default", c.body); r.Status != 400 || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("PATCH %s: %d %s; want 400 naming %q", c.body, r.Status, r.Body, c.want)
		}
	}
	if r := e.admin("PATCH", "/api/v1/policies/nope", `{"name":"x"}`); r.Status != 404 {
		t.Errorf("PATCH of a missing policy: %d", r.Status)
	}
	if e.changeCount() != changes {
		t.Error("a refused patch changed the configuration")
	}
}
