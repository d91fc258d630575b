package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBulkReplaceRecompilesOnePolicy: a bulk PUT of one policy's rules goes
// live by recompiling that policy from the rules the API stored (no reload
// of every policy), other policies keep answering as before, and decisions
// name the stored rule ids.
func TestBulkReplaceRecompilesOnePolicy(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir(), false))
	if code, b := apiDo(t, s, "POST", "/api/v1/policies", `{"id":"sales","name":"Sales","default_action":{"decision":"permit"}}`); code != 201 {
		t.Fatalf("create policy: %d %s", code, b)
	}
	if code, b := apiDo(t, s, "POST", "/api/v1/policies/sales/rules",
		`{"priority":1,"match":{"calling":"111"},"action":{"decision":"deny","reason":"blocked"}}`); code != 201 {
		t.Fatalf("create rule: %d %s", code, b)
	}
	c := dialCUCM(t, s.CURRIAddr())
	waitDecision(t, c, "/curri/sales", "111", "Deny")
	before := reloads(t, s)

	var rules []string
	for i := range 2000 {
		rules = append(rules, fmt.Sprintf(`{"priority":%d,"match":{"calling":"+1972555%04d"},"action":{"decision":"deny","reason":"blocked"}}`, 10+i%7, i))
	}
	rules = append(rules, `{"priority":5,"match":{"calling":"+19725551999"},"action":{"decision":"permit"}}`)
	// A full reload still due to the setup's changes (the periodic version
	// check, every 2 s) may land inside an attempt and be counted with it.
	// That is rare, so a few attempts tell it from a fast path that never
	// works.
	// Each attempt adds a rule of its own and waits for it, so a decision
	// is never read from an earlier attempt's snapshot.
	var after map[string]int
	for attempt := 0; ; attempt++ {
		marker := fmt.Sprintf("+1972666000%d", attempt)
		body := "[" + strings.Join(rules, ",") + fmt.Sprintf(`,{"priority":1,"match":{"calling":%q},"action":{"decision":"permit"}}]`, marker)
		if code, b := apiDo(t, s, "PUT", "/api/v1/policies/default/rules", body); code != 200 {
			t.Fatalf("replace: %d %s", code, b)
		}
		waitDecision(t, c, "/curri/default", marker, "Permit")
		waitDecision(t, c, "/curri/default", "+19725550042", "Deny")
		// priority 5 beats the deny at a later priority for the same number
		waitDecision(t, c, "/curri/default", "+19725551999", "Permit")
		waitDecision(t, c, "/curri/sales", "111", "Deny")
		// The counters move just after the swap. A replacement after the
		// first sends mostly the same rules, so it is compiled as changes
		// (scope policy_changes): that is a single-policy recompile too.
		one := func(m map[string]int) int { return m["policy"] + m["policy_changes"] }
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			after = reloads(t, s)
			if one(after)+after["all"] > one(before)+before["all"] || time.Now().After(deadline) {
				break
			}
		}
		if one(after) == one(before)+1 && after["all"] == before["all"] {
			break
		}
		if attempt == 4 {
			t.Fatalf("reloads %v -> %v: want one single-policy recompile and no full reload", before, after)
		}
		t.Logf("attempt %d: reloads %v -> %v; trying again", attempt, before, after)
		before = after
	}

	// The decision names the rule id the store gave it.
	code, b := apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"calling":"+19725550042","called":"50100"}`)
	var res struct {
		Decision struct {
			RuleID int64 `json:"rule_id"`
		} `json:"decision"`
	}
	err := json.Unmarshal(b, &res)
	dec := res.Decision
	if code != 200 || err != nil || dec.RuleID == 0 {
		t.Fatalf("evaluate: %d %s", code, b)
	}
	code, b = apiDo(t, s, "GET", fmt.Sprintf("/api/v1/rules/%d", dec.RuleID), "")
	if code != 200 || !strings.Contains(string(b), "+19725550042") {
		t.Errorf("rule %d of the decision: %d %s", dec.RuleID, code, b)
	}
}

func waitDecision(t *testing.T, c *cucm, path, calling, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := c.do("POST", path, xacmlRequest(calling, "50102"))
		if decisionOf(t, body) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s from %s: %s, want %s", path, calling, decisionOf(t, body), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func reloads(t *testing.T, s *Server) map[string]int {
	t.Helper()
	_, body := get(t, "http://"+s.HTTPAddr()+"/metrics")
	out := map[string]int{}
	for _, scope := range []string{"all", "policy", "policy_changes"} {
		prefix := `signalbox_policy_reloads_total{scope="` + scope + `"} `
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				var f float64
				fmt.Sscan(v, &f)
				out[scope] = int(f)
			}
		}
	}
	return out
}
