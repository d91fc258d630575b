package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// TestErrorResponsesGolden pins the JSON error format and the API's own
// messages (regenerate with go test -update).
func TestErrorResponsesGolden(t *testing.T) {
	e := newEnv(t)
	cases := []struct{ method, path, token, ct, body string }{
		{"GET", "/api/v1/policies", "", "", ""},
		{"GET", "/api/v1/policies", "nope", "", ""},
		{"DELETE", "/api/v1/policies/default", adminToken, "", ""},
		{"GET", "/api/v1/policies/missing", adminToken, "", ""},
		{"POST", "/api/v1/policies", adminToken, "", `{"id":"a","nmae":"x"}`},
		{"POST", "/api/v1/policies", adminToken, "", `{"id":"a","name":["x"]}`},
		{"POST", "/api/v1/policies", adminToken, "", `{"id":"a" "name":"x"}`},
		{"POST", "/api/v1/policies", adminToken, "", `{"id":"a"`},
		{"POST", "/api/v1/policies", adminToken, "text/plain", `id=a`},
		{"POST", "/api/v1/policies", adminToken, "", `{"id":"A B"}`},
		{"PUT", "/api/v1/policies/default/rules", adminToken, "", `{"priority":1}`},
		{"POST", "/api/v1/policies/default/lists/grey/entries", adminToken, "", `{"calling":"1"}`},
		{"GET", "/api/v1/calls?since=yesterday", adminToken, "", ""},
		{"GET", "/api/v1/calls?limit=0", adminToken, "", ""},
		{"POST", "/api/v1/tokens", adminToken, "", `{"name":"x","role":"root"}`},
	}
	var out bytes.Buffer
	for _, c := range cases {
		r := e.req(c.method, c.path, c.token, c.ct, c.body)
		fmt.Fprintf(&out, "%s %s %s\n%d %s\n", c.method, c.path, c.body, r.Status, r.Body)
	}
	golden(t, "errors.golden", out.Bytes())
}

// FuzzDecodeRule: any body decodes into a rule or gives a 400 (never a
// panic, never another status).
func FuzzDecodeRule(f *testing.F) {
	for _, s := range []string{exampleRule, `[]`, `{"enabled":null}`, `{"match":{"calling":1}}`, `{"a":1}`, `{"expires_at":"x"}`, "\xff", `{"tags":["a",2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var in ruleInput
		err := decodeJSONBytes(b, &in)
		if err == nil {
			// What was accepted survives a round trip: written out and
			// decoded again, it is the same rule.
			out1, err := json.Marshal(in)
			if err != nil {
				t.Fatalf("%q: accepted, but cannot be written: %v", b, err)
			}
			var again ruleInput
			if err := decodeJSONBytes(out1, &again); err != nil {
				t.Fatalf("%q: accepted, but its own encoding %s is refused: %v", b, out1, err)
			}
			out2, _ := json.Marshal(again)
			if !bytes.Equal(out1, out2) {
				t.Fatalf("%q: round trip differs:\n%s\n%s", b, out1, out2)
			}
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Msg == "" {
			t.Fatalf("%q: error %#v", b, err)
		}
	})
}
