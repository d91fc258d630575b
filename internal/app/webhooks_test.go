package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/webhook"
	"github.com/signalbox/signalbox/internal/testkit"
)

// Webhooks made through the API get signed events from a running serve:
// a rule's hits (throttled), a rate limit tripping, a block-list hit and an
// alarm; a test event on demand. The receiver checks each signature as the
// README tells one to, with the secret the API gave once.
func TestWebhooksThroughServe(t *testing.T) {
	var (
		mu     sync.Mutex
		secret string
		events []webhook.Event
		bad    []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		var ts, sig string
		for _, p := range strings.Split(r.Header.Get("X-Signalbox-Signature"), ",") {
			if k, v, ok := strings.Cut(p, "="); ok && k == "t" {
				ts = v
			} else if ok && k == "v1" {
				sig = v
			}
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "." + string(body)))
		if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(m.Sum(nil)))) {
			bad = append(bad, "bad signature on "+string(body))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			bad = append(bad, err.Error())
		}
		events = append(events, ev)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	s := startServer(t, testConfig(t, t.TempDir(), false))
	defer s.Shutdown()
	code, b := apiDo(t, s, "POST", "/api/v1/webhooks", `{"name":"noc","url":"`+recv.URL+`/signalbox",`+
		`"events":["rule_hit","rate_limited","block_list_hit","alarm_raised"],"throttle_seconds":60}`)
	var created struct {
		Secret    string `json:"secret"`
		SecretSet bool   `json:"secret_set"`
	}
	_ = json.Unmarshal(b, &created)
	if code != 201 || !strings.HasPrefix(created.Secret, "whsec_") || !created.SecretSet {
		t.Fatalf("create: %d %s", code, b)
	}
	mu.Lock()
	secret = created.Secret
	mu.Unlock()
	if code, b := apiDo(t, s, "GET", "/api/v1/webhooks/noc", ""); code != 200 || strings.Contains(string(b), "whsec_") || !strings.Contains(string(b), `"secret_set":true`) {
		t.Errorf("get shows the secret or not its presence: %d %s", code, b)
	}
	for body, want := range map[string]string{
		`{"name":"x","url":"ftp://h","events":["rule_hit"]}`:        "url",
		`{"name":"x","url":"http://h","events":["everything"]}`:     "events[0]",
		`{"name":"noc","url":"http://h","events":["rule_hit"]}`:     "already exists",
		`{"name":"x","url":"http://h","events":["rule_hit"],"x":1}`: "x",
	} {
		if code, b := apiDo(t, s, "POST", "/api/v1/webhooks", body); code/100 != 4 || !strings.Contains(string(b), want) {
			t.Errorf("POST %s: %d %s, want an error naming %s", body, code, b, want)
		}
	}

	// The console's "send test event".
	code, b = apiDo(t, s, "POST", "/api/v1/webhooks/noc/test", "")
	if code != 200 || !strings.Contains(string(b), `"delivered":true`) || !strings.Contains(string(b), `"status":204`) {
		t.Fatalf("test event: %d %s", code, b)
	}

	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit"},"rate_limit":{"per_calling":{"calls":1,"window_seconds":60}}}`},
		{"POST", "/api/v1/policies/default/rules", `{"match":{"called":"911"},"action":{"decision":"permit"}}`},
		{"POST", "/api/v1/policies/default/lists/block/entries", `{"calling":"9725550199"}`},
	} {
		if code, b := apiDo(t, s, c.method, c.path, c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, b)
		}
	}
	cucm := dialCUCM(t, s.CURRIAddr())
	testkit.WaitFor(t, 10*time.Second, "the block list live", func() bool {
		_, body := cucm.do("POST", "/curri/default", xacmlRequest("9725550199", "5000"))
		return decisionOf(t, body) == "Deny"
	})
	for i := range 3 { // three callers to 911: one rule_hit event, two held back
		cucm.do("POST", "/curri/default", xacmlRequest(fmt.Sprintf("97255501%02d", i), "911"))
	}
	cucm.do("POST", "/curri/default", xacmlRequest("4085550100", "5000")) // the limit's one call
	cucm.do("POST", "/curri/default", xacmlRequest("4085550100", "5000")) // over it
	cucm.do("POST", "/curri/typo", xacmlRequest("4085550101", "5000"))    // raises curri_unknown_policy

	want := map[string]int{webhook.EventTest: 1, webhook.EventBlockListHit: 1, webhook.EventRuleHit: 1,
		webhook.EventRateLimited: 1, webhook.EventAlarmRaised: 1}
	testkit.WaitForState(t, 15*time.Second, "the events", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		got := map[string]int{}
		for _, e := range events {
			got[e.Type]++
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
	})
	mu.Lock()
	for _, e := range events {
		switch e.Type {
		case webhook.EventRuleHit:
			if e.Call == nil || e.Call.Called != "911" || e.Call.RuleID == 0 {
				t.Errorf("rule event %+v", e)
			}
		case webhook.EventRateLimited:
			if e.Call == nil || e.Call.Calling != "4085550100" || e.Call.Decision != "deny" {
				t.Errorf("rate-limit event %+v", e)
			}
		case webhook.EventAlarmRaised:
			if e.Alarm == nil || e.Alarm.Kind != "curri_unknown_policy" {
				t.Errorf("alarm event %+v", e)
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("receiver: %v", bad)
	}
	mu.Unlock()

	_, metrics := get(t, "http://"+s.HTTPAddr()+"/metrics")
	if want := `signalbox_webhook_events_total{result="throttled",webhook="noc"} 2`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if code, b := apiDo(t, s, "GET", "/api/v1/audit?resource=webhooks", ""); code != 200 || !strings.Contains(string(b), `"action":"create webhook"`) {
		t.Errorf("audit: %d %s", code, b)
	}
	if code, _ := apiDo(t, s, "DELETE", "/api/v1/webhooks/noc", ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
}
