package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/platform/store"
)

func TestTokensAndAuth(t *testing.T) {
	e := newEnv(t)
	var viewer, admin2 createdToken
	e.must(201, "POST", "/api/v1/tokens", `{"name":"noc","role":"viewer"}`).decode(t, &viewer)
	e.must(201, "POST", "/api/v1/tokens", `{"name":"ops","role":"admin"}`).decode(t, &admin2)
	if !strings.HasPrefix(viewer.Token, "sbx_") || len(viewer.Token) != 4+43 || viewer.ID == "" || viewer.Role != RoleViewer {
		t.Errorf("created token = %+v", viewer)
	}
	if viewer.Token == admin2.Token || viewer.ID == admin2.ID {
		t.Error("two tokens share a secret or id")
	}

	list := e.must(200, "GET", "/api/v1/tokens", "")
	if strings.Contains(string(list.Body), viewer.Token) || strings.Contains(string(list.Body), hashToken(viewer.Token)) {
		t.Errorf("token list leaks a secret or hash: %s", list.Body)
	}
	var toks struct{ Tokens []store.Token }
	list.decode(t, &toks)
	if len(toks.Tokens) != 2 {
		t.Errorf("tokens = %+v", toks)
	}

	cases := []struct {
		name, method, path, auth, body string
		status                         int
	}{
		{"no header", "GET", "/api/v1/policies", "", "", 401},
		{"not bearer", "GET", "/api/v1/policies", "Basic YTpi", "", 401},
		{"empty bearer", "GET", "/api/v1/policies", "Bearer ", "", 401},
		{"wrong token", "GET", "/api/v1/policies", "Bearer sbx_wrong", "", 401},
		{"admin token prefix", "GET", "/api/v1/policies", "Bearer " + adminToken[:5], "", 401},
		{"admin token", "GET", "/api/v1/policies", "Bearer " + adminToken, "", 200},
		{"bearer any case", "GET", "/api/v1/policies", "bearer " + adminToken, "", 200},
		{"viewer reads policies", "GET", "/api/v1/policies", "Bearer " + viewer.Token, "", 200},
		{"viewer reads rules", "GET", "/api/v1/policies/default/rules", "Bearer " + viewer.Token, "", 200},
		{"viewer reads calls", "GET", "/api/v1/calls", "Bearer " + viewer.Token, "", 200},
		{"viewer reads version", "GET", "/api/v1/version", "Bearer " + viewer.Token, "", 200},
		{"viewer writes", "POST", "/api/v1/policies/default/rules", "Bearer " + viewer.Token, exampleRule, 403},
		{"viewer deletes", "DELETE", "/api/v1/policies/default", "Bearer " + viewer.Token, "", 403},
		{"viewer evaluates", "POST", "/api/v1/policies/default/evaluate", "Bearer " + viewer.Token, `{"calling":"1"}`, 403},
		{"viewer lists tokens", "GET", "/api/v1/tokens", "Bearer " + viewer.Token, "", 403},
		{"viewer mints token", "POST", "/api/v1/tokens", "Bearer " + viewer.Token, `{"name":"x","role":"admin"}`, 403},
		{"stored admin writes", "POST", "/api/v1/policies", "Bearer " + admin2.Token, `{"id":"byops"}`, 201},
	}
	for _, c := range cases {
		h := map[string]string{}
		if c.auth != "" {
			h["Authorization"] = c.auth
		}
		if c.body != "" {
			h["Content-Type"] = "application/json"
		}
		r := e.reqH(c.method, c.path, h, c.body)
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d; body %s", c.name, r.Status, c.status, r.Body)
			continue
		}
		if c.status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q", c.name, r.Header.Get("WWW-Authenticate"))
		}
		if c.status >= 400 {
			var eb errorBody
			if err := json.Unmarshal(r.Body, &eb); err != nil || eb.Error == "" {
				t.Errorf("%s: error body %s", c.name, r.Body)
			}
		}
	}
	if rules, _ := e.st.ListRules(t.Context(), "default"); len(rules) != 0 {
		t.Error("a viewer's write was stored")
	}

	bad := []struct{ body, field string }{
		{`{"name":"x","role":"root"}`, "role"},
		{`{"name":"","role":"viewer"}`, "name"},
		{`{"name":"x","role":"viewer","expires":"never"}`, "expires"},
	}
	for _, b := range bad {
		if eb := e.must(400, "POST", "/api/v1/tokens", b.body).errBody(t); eb.Field != b.field {
			t.Errorf("%s: field %q, want %q", b.body, eb.Field, b.field)
		}
	}

	e.must(204, "DELETE", "/api/v1/tokens/"+viewer.ID, "")
	e.must(404, "DELETE", "/api/v1/tokens/"+viewer.ID, "")
	if r := e.req("GET", "/api/v1/policies", viewer.Token, "", ""); r.Status != 401 {
		t.Errorf("deleted token: status %d, want 401", r.Status)
	}
}

func TestNoAdminTokenConfigured(t *testing.T) {
	e := newEnv(t)
	h, err := New(Config{Store: e.st})
	if err != nil {
		t.Fatal(err)
	}
	// An empty admin token must never match an empty or any bearer.
	for _, auth := range []string{"", "Bearer ", "Bearer x", "Bearer " + adminToken} {
		req := httptest.NewRequest("GET", "/api/v1/policies", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 401 {
			t.Errorf("auth %q: status %d, want 401", auth, rec.Code)
		}
	}
}
