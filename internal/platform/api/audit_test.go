package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/platform/store"
)

// Every change made through the API is in the audit log with who made it;
// only admins read it.
func TestAuditLog(t *testing.T) {
	e := newEnv(t)
	var tok struct{ ID, Token string }
	e.must(http.StatusCreated, "POST", "/api/v1/tokens", `{"name":"ops-alice","role":"admin"}`).decode(t, &tok)
	var viewer struct{ Token string }
	e.must(http.StatusCreated, "POST", "/api/v1/tokens", `{"name":"grafana","role":"viewer"}`).decode(t, &viewer)
	if r := e.req("POST", "/api/v1/policies/default/rules", tok.Token, "", `{"enabled":true,"match":{"calling":"1"},"action":{"decision":"deny"}}`); r.Status != http.StatusCreated {
		t.Fatalf("rule: %d %s", r.Status, r.Body)
	}
	if r := e.req("POST", "/api/v1/directories", tok.Token, "", `{"id":"corp","name":"Corp"}`); r.Status != http.StatusCreated {
		t.Fatalf("directory: %d %s", r.Status, r.Body)
	}
	// A refused change is not a change.
	if r := e.req("POST", "/api/v1/directories", tok.Token, "", `{"id":"Bad Id"}`); r.Status != http.StatusBadRequest {
		t.Fatalf("bad directory: %d", r.Status)
	}
	var out struct{ Records []store.AuditRecord }
	e.must(http.StatusOK, "GET", "/api/v1/audit", "").decode(t, &out)
	var got []string
	for _, a := range out.Records {
		got = append(got, a.Actor+"/"+a.Role+": "+a.Action+" "+a.Resource+" "+a.Target)
	}
	want := []string{"ops-alice/admin: create directory directories corp", "ops-alice/admin: create rule rules ",
		"admin-token/admin: create token tokens ", "admin-token/admin: create token tokens "}
	if len(got) != 4 {
		t.Fatalf("audit: %q", got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("record %d: %q, want %q...", i, got[i], w)
		}
	}
	if out.Records[1].TokenID != tok.ID || out.Records[3].Detail != "name=ops-alice role=admin" || out.Records[0].Client == "" {
		t.Errorf("records: %+v", out.Records)
	}
	e.must(http.StatusOK, "GET", "/api/v1/audit?actor=ops-alice&resource=directories&since=-1h&limit=1", "").decode(t, &out)
	if len(out.Records) != 1 || out.Records[0].Action != "create directory" {
		t.Errorf("filtered: %+v", out.Records)
	}
	// Each kind of change is found under its own resource: a shared list
	// and its entries under lists, a rule under rules.
	if r := e.req("POST", "/api/v1/lists", tok.Token, "", `{"id":"robocallers","name":"Robocallers","kind":"block"}`); r.Status != http.StatusCreated {
		t.Fatalf("shared list: %d %s", r.Status, r.Body)
	}
	if r := e.req("POST", "/api/v1/lists/robocallers/entries", tok.Token, "", `{"calling":"9725550101"}`); r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("shared list entries: %d %s", r.Status, r.Body)
	}
	for resource, actions := range map[string][]string{"lists": {"add shared list entries", "create shared list"}, "rules": {"create rule"}} {
		e.must(http.StatusOK, "GET", "/api/v1/audit?resource="+resource, "").decode(t, &out)
		var got []string
		for _, a := range out.Records {
			got = append(got, a.Action)
		}
		if strings.Join(got, ",") != strings.Join(actions, ",") {
			t.Errorf("resource=%s: %q, want %q", resource, got, actions)
		}
	}
	if r := e.req("GET", "/api/v1/audit", viewer.Token, "", ""); r.Status != http.StatusForbidden {
		t.Errorf("viewer reads the audit log: %d", r.Status)
	}
	if r := e.admin("GET", "/api/v1/audit?since=yesterday", ""); r.Status != http.StatusBadRequest || r.errBody(t).Field != "since" {
		t.Errorf("bad since: %d %s", r.Status, r.Body)
	}
}
