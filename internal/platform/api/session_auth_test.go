package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/signin"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// TestSessionAuth: requests carrying a console sign-in session's cookie
// (a session as package signin stores it) instead of a bearer token. Reads
// need only the cookie; changes need the session's CSRF token too; the
// role is the session's; an ended session is a 401 that says so; and the
// audit log names the person.
func TestSessionAuth(t *testing.T) {
	var svc *signin.Service
	e := newEnvWith(t, func(e *env, c *Config) {
		var err error
		svc, err = signin.New(signin.Config{Issuer: "https://id.example.net", ClientID: "sbx", Store: e.st,
			RedirectURL: "https://sbx.example.net/auth/callback", ViewerGroups: []string{"noc"}})
		if err != nil {
			t.Fatal(err)
		}
		c.Sessions = svc
	})
	ctx := context.Background()
	sessions := map[string]store.Session{}
	for _, se := range []store.Session{
		{Hash: hashToken("ada-secret"), Subject: "u-ada", Name: "ada@example.net", Role: RoleAdmin, CSRF: "csrf-ada", ExpiresAt: time.Now().Add(time.Hour)},
		{Hash: hashToken("bob-secret"), Subject: "u-bob", Name: "bob", Role: RoleViewer, CSRF: "csrf-bob", ExpiresAt: time.Now().Add(time.Hour)},
		{Hash: hashToken("old-secret"), Subject: "u-old", Name: "old", Role: RoleAdmin, CSRF: "csrf-old", ExpiresAt: time.Now().Add(time.Second)},
	} {
		if err := e.st.CreateSession(ctx, &se); err != nil {
			t.Fatal(err)
		}
		sessions[se.Subject] = se
	}
	do := func(method, path, cookie, csrf, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: signin.SessionCookie, Value: cookie})
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return r.StatusCode, string(b)
	}
	for _, c := range []struct {
		name, method, path, cookie, csrf, body string
		status                                 int
		says                                   string
	}{
		{"admin reads", "GET", "/api/v1/policies", "ada-secret", "", "", 200, ""},
		{"admin changes without CSRF", "POST", "/api/v1/lists", "ada-secret", "", `{"id":"l1","name":"L1","kind":"block"}`, 403, "X-CSRF-Token"},
		{"admin changes with another's CSRF", "POST", "/api/v1/lists", "ada-secret", "csrf-bob", `{"id":"l1","name":"L1","kind":"block"}`, 403, "X-CSRF-Token"},
		{"admin changes", "POST", "/api/v1/lists", "ada-secret", "csrf-ada", `{"id":"l1","name":"L1","kind":"block"}`, 201, ""},
		{"admin lists tokens", "GET", "/api/v1/tokens", "ada-secret", "", "", 200, ""},
		{"viewer reads", "GET", "/api/v1/lists", "bob-secret", "", "", 200, "L1"},
		{"viewer changes", "POST", "/api/v1/lists", "bob-secret", "csrf-bob", `{"id":"l2","name":"L2","kind":"block"}`, 403, "you have the viewer role"},
		{"viewer lists tokens", "GET", "/api/v1/tokens", "bob-secret", "", "", 403, "admin role only"},
		{"unknown cookie", "GET", "/api/v1/policies", "made-up", "", "", 401, "session has ended"},
	} {
		code, body := do(c.method, c.path, c.cookie, c.csrf, c.body)
		if code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.name, code, body, c.status, c.says)
		}
	}
	// A session that expires stops working at once.
	time.Sleep(time.Until(sessions["u-old"].ExpiresAt) + 10*time.Millisecond)
	if code, body := do("GET", "/api/v1/policies", "old-secret", "", ""); code != 401 {
		t.Errorf("expired session: %d %s", code, body)
	}
	recs, err := e.st.SearchAudit(ctx, store.AuditQuery{Since: time.Now().Add(-time.Hour)})
	if err != nil || len(recs) != 1 || recs[0].Actor != "ada@example.net" || recs[0].TokenID != "oidc:u-ada" || recs[0].Role != RoleAdmin {
		t.Errorf("audit: %+v %v; want the list's creation by ada@example.net", recs, err)
	}
}
