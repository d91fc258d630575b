package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestCURRIFieldCorpus answers the real-world request bodies of
// internal/callcontrol/curri/testdata/requests (SOURCES.md names each one's source)
// through serve on a fresh data dir, over one kept-alive connection with
// CUCM's headers, the way a CallManager node sends them; then checks what
// the call log says was sent, the dry run's matched form, aliases, and the
// keepalive of a policy that does not exist.
func TestCURRIFieldCorpus(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), false)
	cfg.CURRIAliases = "/pdp/AuthorizationEndPoint=default"
	s := startServer(t, cfg)
	defer s.Shutdown()

	for _, e := range []string{`{"calling":"+13222000111","note":"E.164 entry"}`, `{"calling":"anonymous","note":"withheld callers"}`} {
		if code, b := apiDo(t, s, "POST", "/api/v1/policies/default/lists/block/entries", e); code != 201 {
			t.Fatalf("add block entry: %d %s", code, b)
		}
	}
	if code, b := apiDo(t, s, "POST", "/api/v1/policies/default/rules",
		`{"priority":10,"match":{"called":"3222404993"},"action":{"decision":"permit","greeting":"in_meeting","modify":{"calling_name":"O365 <busy>"}}}`); code != 201 {
		t.Fatalf("create rule: %d %s", code, b)
	}
	testkit.WaitFor(t, 10*time.Second, "block list and rule live", func() bool {
		_, b := apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"called":"1"}`)
		_, r := apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"calling":"5101","called":"3222404993"}`)
		return strings.Contains(string(b), `"step":"block_list"`) && strings.Contains(string(r), `"step":"rule"`)
	})

	c := dialCUCM(t, s.CURRIAddr())
	if resp, _ := c.do("HEAD", "/curri", ""); resp.StatusCode != 200 {
		t.Fatalf("HEAD /curri: %d", resp.StatusCode)
	}
	tests := []struct {
		file, path, decision string
		contains             []string
	}{
		{"cisco_hello_world.xml", "/curri", "Permit", []string{`&lt;continue&gt;&lt;/continue&gt;`}},
		{"cisco_page_lowercase.xml", "/curri/default/", "Permit", nil},
		{"gve_tempXacmlReq.xml", "/pdp/AuthorizationEndPoint", "Permit",
			[]string{`&lt;modify callingname="O365 &amp;lt;busy&amp;gt;"/&gt;&lt;greeting identification="in_meeting"/&gt;`}},
		{"calltelemetry_load_test.xml", "/curri/policy?api_key=089131c3-6de2-4cc2-ae97-cd20975cd09e", "Indeterminate", []string{"unknown policy"}},
		{"calltelemetry_load_test.xml", "/CURRI/Default?api_key=089131c3-6de2-4cc2-ae97-cd20975cd09e", "Permit", nil},
		{"pgiralt_padded_calling.xml", "/curri", "Permit", nil},
		{"pgiralt_transformed_only.xml", "/curri", "Permit", nil},
		{"with_device_name.xml", "/curri", "Permit", nil},
		{"anonymous_withheld.xml", "/curri", "Deny", []string{`&lt;reason&gt;blocked&lt;/reason&gt;`}},
		{"globalized_local_calling.xml", "/curri", "Deny", []string{`&lt;reason&gt;blocked&lt;/reason&gt;`}},
		{"duplicate_attribute.xml", "/curri", "Permit", nil},
		{"hostile_billion_laughs.xml", "/curri", "Indeterminate", []string{"doctype"}},
		{"hostile_xxe.xml", "/curri", "Indeterminate", []string{"doctype"}},
		{"broken_missing_called.xml", "/curri", "Indeterminate", []string{"status:missing-attribute"}},
	}
	for _, tc := range tests {
		body, err := os.ReadFile(filepath.Join("../callcontrol/curri/testdata/requests", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		resp, out := c.do("POST", tc.path, string(body))
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("%s to %s: status %d, close %v", tc.file, tc.path, resp.StatusCode, resp.Close)
		}
		if got := decisionOf(t, out); got != tc.decision {
			t.Errorf("%s to %s: %s, want %s\n%s", tc.file, tc.path, got, tc.decision, out)
		}
		for _, want := range tc.contains {
			if !strings.Contains(out, want) {
				t.Errorf("%s: response lacks %s\n%s", tc.file, want, out)
			}
		}
	}
	// A keepalive for a policy that does not exist is answered 404 on the
	// same connection (CUCM then marks the server down for the profile and
	// uses its secondary); the connection stays usable.
	if resp, _ := c.do("HEAD", "/curri/typo", ""); resp.StatusCode != 404 || resp.Close {
		t.Fatalf("HEAD /curri/typo: %d close %v, want 404 on a kept connection", resp.StatusCode, resp.Close)
	}
	if resp, _ := c.do("HEAD", "/pdp/AuthorizationEndPoint", ""); resp.StatusCode != 200 {
		t.Fatalf("HEAD on the alias: %d", resp.StatusCode)
	}

	// The call log says which form matched and what CUCM was told.
	type call struct {
		Calling            string
		TransformedCalling string `json:"transformed_calling"`
		Decision, Step     string
		Form               string `json:"matched_form"`
		Sent, Error        string
	}
	var calls struct{ Calls []call }
	testkit.WaitFor(t, 5*time.Second, "call log", func() bool {
		_, b := apiDo(t, s, "GET", "/api/v1/calls?limit=100", "")
		calls.Calls = nil
		return json.Unmarshal(b, &calls) == nil && len(calls.Calls) >= len(tests)
	})
	find := func(pred func(call) bool) call {
		for _, c := range calls.Calls {
			if pred(c) {
				return c
			}
		}
		t.Fatalf("no such call in the log: %+v", calls.Calls)
		return call{}
	}
	if g := find(func(c call) bool { return c.Calling == "3222000111" }); g.Step != "block_list" || g.Form != "transformed_calling" || g.Sent != "reject reason=blocked" {
		t.Errorf("globalized call logged as %+v", g)
	}
	if a := find(func(c call) bool { return c.Calling == "" && c.TransformedCalling == "" && c.Decision == "deny" }); a.Form != "calling" {
		t.Errorf("anonymous call logged as %+v", a)
	}
	if g := find(func(c call) bool { return c.Calling == "5101" }); g.Sent != `continue modify calling_name="O365 <busy>" greeting=in_meeting` {
		t.Errorf("gve call logged as sent %q", g.Sent)
	}
	if x := find(func(c call) bool { return c.Decision == "indeterminate" && strings.Contains(c.Error, "doctype") }); x.Sent != "" {
		t.Errorf("indeterminate call logged as sent %q", x.Sent)
	}

	// The dry run says which form matched too.
	_, b := apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"calling":"3222000111","transformed_calling":"+13222000111","called":"1"}`)
	if !strings.Contains(string(b), `"matched_form":"transformed_calling"`) {
		t.Errorf("dry run: %s", b)
	}

	// Metrics and the alarm: anonymous calls counted, the unknown-policy
	// keepalive counted and alarmed.
	_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{"signalbox_curri_anonymous_calls_total 1", `signalbox_curri_http_errors_total{reason="unknown_policy_keepalive"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	testkit.WaitFor(t, 8*time.Second, "unknown-policy keepalive alarm", func() bool {
		_, b := apiDo(t, s, "GET", "/api/v1/alarms", "")
		return strings.Contains(string(b), `"id":"curri/typo/curri_unknown_policy"`) && strings.Contains(string(b), "answered 404")
	})

}
