package reputation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// The decision time a reputation step adds to a call, through the engine
// as CURRI calls it: without the step, with every number in the cache
// (warm), and with every number new (cold: an HTTP request to a service on
// loopback that answers at once).
func BenchmarkEvaluateWithReputation(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"score":10,"labels":["business"]}`)
	}))
	defer srv.Close()
	rep := &callpolicy.Reputation{URL: srv.URL + "/?n={number}", CacheSize: 1 << 20,
		Actions: []callpolicy.ReputationAction{{MinScore: ptr(80.0), Action: callpolicy.Action{Decision: callpolicy.Deny}}}}
	engine := func(r *callpolicy.Reputation) *callpolicy.Engine {
		e := callpolicy.NewEngine(nil)
		snap, err := callpolicy.Compile([]callpolicy.PolicyConfig{{Policy: callpolicy.Policy{ID: "p",
			DefaultAction: callpolicy.Action{Decision: callpolicy.Permit}, Reputation: r}}})
		if err != nil {
			b.Fatal(err)
		}
		e.Swap(snap)
		c, err := New(Config{})
		if err != nil {
			b.Fatal(err)
		}
		e.SetReputer(c)
		return e
	}
	now := time.Now()
	run := func(b *testing.B, e *callpolicy.Engine, numbers func(i int) string) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			call := callpolicy.Call{Calling: numbers(i), Called: "5000"}
			if d, ok := e.Evaluate("p", &call, now); !ok || d.Action.Decision != callpolicy.Permit {
				b.Fatalf("%+v", d)
			}
		}
	}
	b.Run("none", func(b *testing.B) {
		run(b, engine(nil), func(i int) string { return "+1972555" + strconv.Itoa(i%1000) })
	})
	b.Run("warm", func(b *testing.B) {
		e := engine(rep)
		for i := range 1000 {
			e.Evaluate("p", &callpolicy.Call{Calling: "+1972555" + strconv.Itoa(i)}, now)
		}
		run(b, e, func(i int) string { return "+1972555" + strconv.Itoa(i%1000) })
	})
	b.Run("cold", func(b *testing.B) { run(b, engine(rep), func(i int) string { return "+1408" + strconv.Itoa(i) }) })
}

func ptr[T any](v T) *T { return &v }
