package app

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestNeighbourhoodRuleOverCURRI: a neighbourhood-spoofing rule, created
// through the API, asked as CUCM asks (XACML over a keep-alive connection)
// against the binary: every caller of the spoofing test list — the called
// number's NPA-NXX in +1, 1+10 and 10-digit forms — is denied, none of the
// legitimate callers is, and an allow-listed neighbour gets through.
func TestNeighbourhoodRuleOverCURRI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0", "-curri-addr", "127.0.0.1:0",
		"-admin-token", "test-admin-token", "-director=false"}, filepath.Join(dir, "serve.log"))
	api := serve.http()
	if code, body := apiAt(t, api, "test-admin-token", "POST", "/api/v1/policies/default/rules",
		`{"priority":5,"match":{"neighbourhood":{"digits":16}},"action":{"decision":"deny"}}`); code != 400 || !strings.Contains(string(body), `"field":"match.neighbourhood.digits"`) {
		t.Errorf("16 digits: %d %s", code, body)
	}
	code, body := apiAt(t, api, "test-admin-token", "POST", "/api/v1/policies/default/rules",
		`{"priority":5,"match":{"neighbourhood":{"digits":6}},"action":{"decision":"deny","announce":"user_unavailable"},"description":"neighbourhood spoofing"}`)
	if code != 201 || !strings.Contains(string(body), `"neighbourhood":{"digits":6}`) {
		t.Fatalf("the rule: %d %s", code, body)
	}
	if code, body := apiAt(t, api, "test-admin-token", "POST", "/api/v1/policies/default/lists/allow/entries", `{"calling":"+19725550142"}`); code != 201 {
		t.Fatalf("allow list: %d %s", code, body)
	}
	if code, body := apiAt(t, api, "test-admin-token", "GET", "/api/v1/policies/default/rules", ""); code != 200 || !strings.Contains(string(body), `"neighbourhood":{"digits":6}`) {
		t.Errorf("the rule as stored: %d %s", code, body)
	}

	cucm := dialCUCM(t, serve.ls.CURRI)
	decide := func(calling, called string) string {
		_, b := cucm.do("POST", "/curri/default", xacmlRequest(calling, called))
		switch {
		case strings.Contains(b, "<Decision>Deny</Decision>"):
			return "deny"
		case strings.Contains(b, "<Decision>Permit</Decision>"):
			return "permit"
		}
		return b
	}
	const called = "9725550101"
	spoofed := []string{"+19725550199", "19725550188", "9725559999", "9725550000", "+19725551234"}
	legitimate := []string{"9725550101", "9725560000", "2145550199", "+442079460999", "anonymous", "5001", "+19725550142"}
	for _, c := range spoofed {
		if got := decide(c, called); got != "deny" {
			t.Errorf("spoofed caller %s: %s", c, got)
		}
	}
	for _, c := range legitimate {
		if got := decide(c, called); got != "permit" {
			t.Errorf("legitimate caller %s: %s", c, got)
		}
	}
	// The call log says which rule denied (it is written a moment later).
	testkit.WaitForState(t, 10*time.Second, "the call in the call log", func() (bool, string) {
		code, body := apiAt(t, api, "test-admin-token", "GET", "/api/v1/calls?number=19725550188&limit=5", "")
		return code == 200 && strings.Contains(string(body), `"step":"rule"`), string(body)
	})
}
