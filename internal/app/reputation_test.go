package app

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// CURRI calls through a policy that asks a real HTTP reputation service:
// one that answers, one that is slow, one that answers 500 and one that
// hangs. Every answer reaches CUCM within the budget, whatever the service
// does; a fail-open policy leaves the unanswered calls to its rules, a
// fail-closed one rejects them.
func TestReputationThroughCURRI(t *testing.T) {
	var requests atomic.Int64
	hang := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		n := r.URL.Query().Get("number")
		switch {
		case strings.HasSuffix(n, "01"):
			fmt.Fprint(w, `{"score":95,"labels":["robocall"]}`)
		case strings.HasSuffix(n, "02"):
			fmt.Fprint(w, `{"score":10}`)
		case strings.HasSuffix(n, "03"):
			fmt.Fprint(w, `{"score":60,"labels":["spoofed"]}`)
		case strings.HasSuffix(n, "04"): // slow
			time.Sleep(150 * time.Millisecond)
			fmt.Fprint(w, `{"score":99}`)
		case strings.HasSuffix(n, "05"): // broken
			http.Error(w, "database down", http.StatusInternalServerError)
		case strings.HasSuffix(n, "06"): // hangs
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	defer svc.Close()
	defer close(hang)

	s := startServer(t, testConfig(t, t.TempDir(), false))
	defer s.Shutdown()
	rep := func(failure string) string {
		return `"reputation":{"url":"` + svc.URL + `/v1/score?number={number}","budget_ms":20,"failure":"` + failure + `",` +
			`"actions":[{"min_score":80,"action":{"decision":"deny","announce":"call_rejected","reason":"blocked"}},` +
			`{"label":"spoofed","action":{"decision":"permit","modify":{"calling_name":"SPAM?"}}}]}`
	}
	for _, p := range []struct{ id, body string }{
		{"default", `{"name":"Default","default_action":{"decision":"permit"},` + rep("open") + `}`},
		{"strict", `{"id":"strict","name":"Strict","default_action":{"decision":"permit"},` + rep("closed") + `}`},
	} {
		method, path := "PUT", "/api/v1/policies/"+p.id
		if p.id == "strict" {
			method, path = "POST", "/api/v1/policies"
		}
		if code, b := apiDo(t, s, method, path, p.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, code, b)
		}
	}
	// Bad settings are refused, naming the field.
	for body, want := range map[string]string{
		`{"name":"x","reputation":{"url":"ftp://x/{number}","actions":[]}}`:                                       "reputation.url",
		`{"name":"x","reputation":{"url":"http://x/","actions":[]}}`:                                              "{number}",
		`{"name":"x","reputation":{"url":"http://x/{number}","budget_ms":60,"actions":[]}}`:                       "reputation.budget_ms",
		`{"name":"x","reputation":{"url":"http://x/{number}","actions":[{"action":{"decision":"deny"}}]}}`:        "reputation.actions[0]",
		`{"name":"x","reputation":{"url":"http://x/{number}","failure":"sometimes","actions":[]}}`:                "reputation.failure",
		`{"name":"x","reputation":{"url":"http://x/{number}","failure_action":{"decision":"deny"},"actions":[]}}`: "closed",
	} {
		if code, b := apiDo(t, s, "PUT", "/api/v1/policies/default", body); code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %s", body, code, b, want)
		}
	}

	cucm := dialCUCM(t, s.CURRIAddr())
	call := func(policy, calling string) (string, string, time.Duration) {
		start := time.Now()
		_, body := cucm.do("POST", "/curri/"+policy, xacmlRequest(calling, "5000"))
		return decisionOf(t, body), body, time.Since(start)
	}
	testkit.WaitFor(t, 10*time.Second, "the reputation settings live", func() bool {
		d, _, _ := call("default", "9725550101")
		return d == "Deny"
	})
	for _, c := range []struct {
		policy, calling, decision, contains string
	}{
		{"default", "9725550101", "Deny", "call_rejected"}, // score 95
		{"default", "9725550102", "Permit", ""},            // score 10: the rules (none): default
		{"default", "9725550103", "Permit", "SPAM?"},       // label spoofed
		{"default", "9725550104", "Permit", ""},            // slow: fail open
		{"default", "9725550105", "Permit", ""},            // 500: fail open
		{"default", "9725550106", "Permit", ""},            // hangs: fail open
		{"strict", "9725550206", "Deny", ""},               // hangs: fail closed
		{"strict", "9725550205", "Deny", ""},               // 500: fail closed
		{"strict", "9725550202", "Permit", ""},             // answered
	} {
		d, body, took := call(c.policy, c.calling)
		if d != c.decision || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s: %s, want %s with %q: %s", c.policy, c.calling, d, c.decision, c.contains, body)
		}
		t.Logf("%s %s: %s in %s", c.policy, c.calling, d, took)
		// The budget is 20 ms: the answer does not wait for the slow
		// service (150 ms) nor the hanging one. The bound leaves a busy
		// box (make test runs this beside the race pass) 100 ms of
		// scheduling; that it reaches CUCM within Cisco's 50 ms is
		// bench curri's to measure, on a quiet box.
		if took > 120*time.Millisecond {
			t.Errorf("%s %s answered in %s", c.policy, c.calling, took)
		}
	}

	// The slow service's answer arrived after its call and is cached: the
	// next call from that number is decided by it, at once.
	time.Sleep(200 * time.Millisecond)
	if d, _, took := call("default", "9725550104"); d != "Deny" || took > 100*time.Millisecond {
		t.Errorf("after the slow answer: %s in %s, want Deny from the cache (not a 20 ms wait and a permit)", d, took)
	}

	// The dry run says what the service answered and whether from the cache.
	code, b := apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"calling":"9725550101","called":"5000","transformed_calling":"+19725550101"}`)
	if code != 200 || !strings.Contains(string(b), `"step":"reputation"`) || !strings.Contains(string(b), "score 95, labels robocall (from the cache)") {
		t.Errorf("dry run: %d %s", code, b)
	}
	code, b = apiDo(t, s, "POST", "/api/v1/policies/default/evaluate", `{"calling":"9725550106","called":"5000","transformed_calling":"+19725550106"}`)
	if code != 200 || !strings.Contains(string(b), "no answer") || !strings.Contains(string(b), "failing open") {
		t.Errorf("dry run, hanging service: %d %s", code, b)
	}
	// The call log keeps the step.
	testkit.WaitFor(t, 5*time.Second, "the call log", func() bool {
		_, b := apiDo(t, s, "GET", "/api/v1/calls?number=9725550101&decision=deny", "")
		return strings.Contains(string(b), `"step":"reputation"`)
	})
	_, metrics := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{`signalbox_reputation_lookups_total{policy="default",result="hit"}`,
		`signalbox_reputation_lookups_total{policy="default",result="timeout"}`,
		`signalbox_reputation_lookups_total{policy="strict",result="error"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
