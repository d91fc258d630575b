package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// BenchmarkReplaceRules100k measures the bulk load of 100,000 rules through
// the API: decode, validate each, one store transaction, and the compile
// beside it.
// Run with -benchtime=1x: one iteration is the whole load.
func BenchmarkReplaceRules100k(b *testing.B) {
	const n = 100_000
	rules := make([]map[string]any, n)
	for i := range rules {
		rules[i] = map[string]any{
			"priority": i,
			"match":    map[string]string{"calling": fmt.Sprintf("+1972%07d", i), "called": "prefix:9"},
			"action":   map[string]string{"decision": "deny", "reason": "blocked"},
		}
	}
	body, err := json.Marshal(rules)
	if err != nil {
		b.Fatal(err)
	}
	// The app's path: the policy is compiled while the store writes it
	// (Config.Live's Replacing), not reloaded through OnChange.
	e := newEnvWith(b, func(e *env, c *Config) {
		c.Live = replacingOnly{onChange: e.onChange, replacing: func(policyID string, rules []callpolicy.Rule) func(bool) {
			done := make(chan *callpolicy.CompiledPolicy, 1)
			go func() {
				cp, err := callpolicy.CompilePolicy(&callpolicy.PolicyConfig{
					Policy: callpolicy.Policy{ID: policyID, DefaultAction: callpolicy.Action{Decision: callpolicy.Permit}}, Rules: rules}, nil)
				if err != nil {
					b.Error(err)
				}
				done <- cp
			}()
			return func(ok bool) {
				if cp := <-done; ok && cp != nil {
					e.engine.Swap(e.engine.Snapshot().With(cp))
				}
			}
		}}
	})
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("PUT", e.srv.URL+"/api/v1/policies/default/rules", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := e.srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}
