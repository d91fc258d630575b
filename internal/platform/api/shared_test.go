package api

import (
	"net/http"
	"strings"
	"testing"
)

func TestSharedListsAndGroups(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/api/v1/policies", `{"id":"sales","name":"Sales"}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"fraud","name":"Known fraud","kind":"block","action":{"decision":"divert","destination":"8000"}}`)
	r := e.req("POST", "/api/v1/lists/fraud/entries", adminToken, "text/csv", "calling,called,expires_at,note\nprefix:+1900,,,premium\n+15551234,,,\n")
	if r.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	// Every policy enforces it.
	for _, p := range []string{"default", "sales"} {
		r := e.must(http.StatusOK, "POST", "/api/v1/policies/"+p+"/evaluate", `{"calling":"+19005550000","called":"1"}`)
		if !strings.Contains(string(r.Body), `"step":"block_list"`) || !strings.Contains(string(r.Body), `"destination":"8000"`) ||
			!strings.Contains(string(r.Body), `shared block list fraud entry`) {
			t.Errorf("%s: %s", p, r.Body)
		}
	}
	// Groups: nested, matched by rules; loops and missing groups refused.
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"board","name":"Board","kind":"group"}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists/board/entries", `{"calling":"+15550001"}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"vip","name":"VIP","kind":"group"}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists/vip/entries", `[{"calling":"prefix:+1212555"},{"calling":"group:board"}]`)
	v := e.configVersion()
	if r := e.admin("POST", "/api/v1/lists/board/entries", `{"calling":"group:vip"}`); r.Status != http.StatusBadRequest ||
		!strings.Contains(r.errBody(t).Error, "group loop") {
		t.Errorf("loop: %d %s", r.Status, r.Body)
	}
	if r := e.admin("POST", "/api/v1/lists/vip/entries", `{"calling":"group:nobody"}`); r.Status != http.StatusBadRequest ||
		!strings.Contains(r.errBody(t).Error, `group "nobody" does not exist`) {
		t.Errorf("missing nested group: %d %s", r.Status, r.Body)
	}
	if e.configVersion() != v {
		t.Error("a refused group entry changed the configuration")
	}
	if r := e.admin("POST", "/api/v1/policies/default/rules", `{"enabled":true,"match":{"calling":"group:nobody"},"action":{"decision":"permit"}}`); r.Status != http.StatusBadRequest ||
		r.errBody(t).Field != "match.calling" {
		t.Errorf("rule naming a missing group: %d %s", r.Status, r.Body)
	}
	rule := e.must(http.StatusCreated, "POST", "/api/v1/policies/default/rules",
		`{"priority":1,"enabled":true,"match":{"calling":"group:vip"},"action":{"decision":"permit","greeting":"vip"}}`)
	r = e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate", `{"calling":"+15550001","called":"1"}`)
	if !strings.Contains(string(r.Body), `"greeting":"vip"`) {
		t.Errorf("rule on a nested group: %s", r.Body)
	}
	// A group in use is not deleted; its kind cannot change.
	if r := e.admin("DELETE", "/api/v1/lists/board", ""); r.Status != http.StatusConflict || !strings.Contains(r.errBody(t).Error, `group "vip"`) {
		t.Errorf("delete nested group: %d %s", r.Status, r.Body)
	}
	if r := e.admin("DELETE", "/api/v1/lists/vip", ""); r.Status != http.StatusConflict || !strings.Contains(r.errBody(t).Error, "rule ") {
		t.Errorf("delete group in use: %d %s", r.Status, r.Body)
	}
	if r := e.admin("PUT", "/api/v1/lists/vip", `{"name":"VIP","kind":"block"}`); r.Status != http.StatusBadRequest || r.errBody(t).Field != "kind" {
		t.Errorf("kind change: %d %s", r.Status, r.Body)
	}
	_ = rule
	// A shared list for named policies only.
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"execs","name":"Execs","kind":"allow","policies":["sales"]}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists/execs/entries", `{"calling":"+19005550000"}`)
	r = e.must(http.StatusOK, "POST", "/api/v1/policies/sales/evaluate", `{"calling":"+19005550000","called":"1"}`)
	if !strings.Contains(string(r.Body), `"step":"allow_list"`) {
		t.Errorf("shared allow list in sales: %s", r.Body)
	}
	r = e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate", `{"calling":"+19005550000","called":"1"}`)
	if !strings.Contains(string(r.Body), `"step":"block_list"`) {
		t.Errorf("shared allow list is not default's: %s", r.Body)
	}
	if r := e.admin("POST", "/api/v1/lists", `{"id":"x","name":"x","kind":"allow","policies":["nope"]}`); r.Status != http.StatusBadRequest || r.errBody(t).Field != "policies[0]" {
		t.Errorf("unknown policy: %d %s", r.Status, r.Body)
	}
	r = e.must(http.StatusOK, "GET", "/api/v1/lists/fraud/entries?format=csv", "")
	if !strings.Contains(string(r.Body), "prefix:+1900,,,premium,") {
		t.Errorf("export: %s", r.Body)
	}
	r = e.must(http.StatusOK, "GET", "/api/v1/lists", "")
	if !strings.Contains(string(r.Body), `"id":"vip","name":"VIP","kind":"group","entries":2`) {
		t.Errorf("lists: %s", r.Body)
	}
}
