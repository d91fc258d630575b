package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/livepolicy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// incrementalEnv is an API wired to a running livepolicy.Manager, as the
// app wires them.
func incrementalEnv(t testing.TB) (*env, *livepolicy.Manager, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	var live *livepolicy.Manager
	e := newEnvWith(t, func(e *env, c *Config) {
		live = livepolicy.New(livepolicy.Config{Engine: e.engine, Store: e.st, Registerer: reg})
		if err := live.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.live = live
		c.Live = live
		c.OnChange = func(string) { live.Changed() }
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { live.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, live, reg
}

// A write of a directory's entries changes the live directory in place:
// no policy is compiled again, and nothing is read back unless the
// change is large.
func TestDirectoryChangedInPlace(t *testing.T) {
	e, live, reg := incrementalEnv(t)
	reloads := func(scope string) float64 {
		return testutil.ToFloat64(mustCounter(t, reg, "signalbox_policy_reloads_total", scope))
	}
	settle := func() {
		t.Helper()
		testkit.WaitFor(t, 5*time.Second, "change live", func() bool { return live.Version() == e.configVersion() })
	}
	e.must(http.StatusCreated, "POST", "/api/v1/directories", `{"id":"corp","name":"Corp"}`)
	e.must(http.StatusOK, "PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit","modify":{"calling_name":"directory:corp"}}}`)
	settle()
	all := reloads("all")
	name := func(calling string) string {
		var ev struct{ Decision callpolicy.Decision }
		e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate", fmt.Sprintf(`{"calling":%q}`, calling)).decode(t, &ev)
		if m := ev.Decision.Action.Modify; m != nil {
			return m.CallingName
		}
		return ""
	}
	e.must(http.StatusOK, "PUT", "/api/v1/directories/corp/entries", `[{"number":"2001","name":"Alice"},{"number":"+1972","name":"Texas","match":"prefix"}]`)
	settle()
	if name("2001") != "Alice" || name("+19725550000") != "Texas" {
		t.Fatalf("names: %q %q", name("2001"), name("+19725550000"))
	}
	e.must(http.StatusOK, "POST", "/api/v1/directories/corp/entries", `{"number":"2001","name":"Alice B."}`)
	settle() // two writes before the first is live are rebuilt whole, by design (livepolicy.offer)
	e.must(http.StatusNoContent, "DELETE", "/api/v1/directories/corp/entries/+1972?match=prefix", "")
	settle()
	if name("2001") != "Alice B." || name("+19725550000") != "" {
		t.Fatalf("after rename and delete: %q %q", name("2001"), name("+19725550000"))
	}
	if reloads("all") != all || reloads("directory_changes") != 3 {
		t.Errorf("reloads: all %v (was %v), directory_changes %v", reloads("all"), all, reloads("directory_changes"))
	}
	// A large import is read back alone, still without compiling policies.
	var b strings.Builder
	b.WriteString("number,name\n")
	for i := range 6000 {
		fmt.Fprintf(&b, "+1555%07d,Caller %d\n", i, i)
	}
	if r := e.req("POST", "/api/v1/directories/corp/entries", adminToken, "text/csv", b.String()); r.Status != http.StatusOK {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	settle()
	if name("+15550005999") != "Caller 5999" || name("2001") != "Alice B." || reloads("directory") != 1 || reloads("all") != all {
		t.Errorf("large import: %q, reloads directory %v all %v", name("+15550005999"), reloads("directory"), reloads("all"))
	}
}

func bulkBody(n int, gen func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"priority":%d,"match":{"calling":"+1972%07d"},"action":{"decision":"deny","reason":"blocked"},"description":%q}`, i, i, gen(i))
	}
	return "[" + strings.Join(parts, ",\n") + "]"
}

// A bulk replacement that changes a few rules writes and compiles only
// those: the others keep their ids (and hits), the calls see the new set.
func TestIncrementalReplacement(t *testing.T) {
	e, live, reg := incrementalEnv(t)
	const n = 2000
	put := func(body string) {
		t.Helper()
		if r := e.admin("PUT", "/api/v1/policies/default/rules", body); r.Status != http.StatusOK {
			t.Fatalf("PUT: %d %s", r.Status, r.Body)
		}
	}
	ids := func() map[string]int64 {
		var out struct{ Rules []callpolicy.Rule }
		e.must(http.StatusOK, "GET", "/api/v1/policies/default/rules", "").decode(t, &out)
		m := map[string]int64{}
		for _, r := range out.Rules {
			m[r.Match.Calling] = r.ID
		}
		return m
	}
	reloads := func(scope string) float64 {
		return testutil.ToFloat64(mustCounter(t, reg, "signalbox_policy_reloads_total", scope))
	}
	put(bulkBody(n, func(i int) string { return "v1" }))
	testkit.WaitFor(t, 5*time.Second, "first load live", func() bool { return live.Version() == e.configVersion() })
	before := ids()
	if len(before) != n {
		t.Fatalf("%d rules stored", len(before))
	}
	full := reloads("policy")

	// 1 % changed: those get new ids, the rest keep theirs.
	put(bulkBody(n, func(i int) string {
		if i%100 == 7 {
			return "v2"
		}
		return "v1"
	}))
	testkit.WaitFor(t, 5*time.Second, "change live", func() bool { return live.Version() == e.configVersion() })
	after := ids()
	kept, renewed := 0, 0
	for num, id := range after {
		if id == before[num] {
			kept++
		} else {
			renewed++
		}
	}
	if kept != n-n/100 || renewed != n/100 || len(after) != n {
		t.Errorf("kept %d, renewed %d of %d", kept, renewed, len(after))
	}
	if reloads("policy_changes") != 1 || reloads("policy") != full {
		t.Errorf("reloads: changes %v, policy %v (was %v)", reloads("policy_changes"), reloads("policy"), full)
	}
	// The live snapshot decides by the new rules.
	var ev struct{ Decision callpolicy.Decision }
	e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate", `{"calling":"+19720000107","called":"1"}`).decode(t, &ev)
	if ev.Decision.RuleID != after["+19720000107"] || ev.Decision.RuleID == before["+19720000107"] {
		t.Errorf("decided by rule %d; stored %d, before %d", ev.Decision.RuleID, after["+19720000107"], before["+19720000107"])
	}

	// A rule whose bytes are new is refused with its place in the body,
	// and nothing changes.
	bad := strings.Replace(bulkBody(n, func(i int) string { return "v1" }), `"calling":"+19720000005"`, `"calling":"x5"`, 1)
	v := e.configVersion()
	if r := e.admin("PUT", "/api/v1/policies/default/rules", bad); r.Status != http.StatusBadRequest || r.errBody(t).Field != "rules[5].match.calling" {
		t.Errorf("bad rule: %d %s", r.Status, r.Body)
	}
	if e.configVersion() != v {
		t.Error("a refused replacement changed the configuration")
	}

	// Sending a quarter new rules replaces everything.
	put(bulkBody(n, func(i int) string {
		if i%4 == 0 {
			return "v3"
		}
		return "v1"
	}))
	testkit.WaitFor(t, 5*time.Second, "full replacement live", func() bool { return live.Version() == e.configVersion() })
	if reloads("policy") != full+1 {
		t.Errorf("a large change was not compiled whole: %v", reloads("policy"))
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, name, scope string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "scope" && l.GetValue() == scope {
					c.Add(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}

// BenchmarkReplaceRules100kChanged measures the process CPU of a bulk
// replacement of 100,000 rules through the API, the live policy manager
// compiling it, when all of them change and when 1 % do (cpu-ns/op).
// Run with -benchtime=4x.
func BenchmarkReplaceRules100kChanged(b *testing.B) {
	for _, pct := range []int{100, 1} {
		b.Run(fmt.Sprintf("%d%%", pct), func(b *testing.B) {
			e, live, _ := incrementalEnv(b)
			const n = 100_000
			gen := 0
			body := func() string {
				return bulkBody(n, func(i int) string {
					if pct == 100 || i%(100/pct) == 0 {
						return fmt.Sprintf("generation %d", gen)
					}
					return "generation 0"
				})
			}
			put := func(s string) {
				req, _ := http.NewRequest("PUT", e.srv.URL+"/api/v1/policies/default/rules", strings.NewReader(s))
				req.Header.Set("Authorization", "Bearer "+adminToken)
				res, err := e.srv.Client().Do(req)
				if err != nil || res.StatusCode != 200 {
					b.Fatalf("PUT: %v %v", err, res)
				}
				res.Body.Close()
				testkit.WaitFor(b, 30*time.Second, "live", func() bool { return live.Version() == e.configVersion() })
			}
			put(body())
			bodies := make([]string, b.N)
			for i := range bodies {
				gen++
				bodies[i] = body()
			}
			b.ResetTimer()
			start := testkit.CPUTime()
			for i := range b.N {
				put(bodies[i])
			}
			testkit.ReportCPU(b, start)
		})
	}
}

func TestArraySpans(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`[]`, nil, true},
		{` [ {"a":"x\"}"} , {"b":[1,{"c":"\\"}]} ] `, []string{`{"a":"x\"}"}`, `{"b":[1,{"c":"\\"}]}`}, true},
		{`[{"a":"\\\""}]`, []string{`{"a":"\\\""}`}, true},
		{`[{"a":1}`, nil, false},
		{`[{"a":"1}]`, nil, false},
		{`[1]`, nil, false},
		{`{"a":1}`, nil, false},
		{`[{"a":1}] x`, nil, false},
	} {
		spans, ok := arraySpans([]byte(tt.in))
		var got []string
		for _, sp := range spans {
			got = append(got, tt.in[sp[0]:sp[1]])
		}
		if ok != tt.ok || (ok && strings.Join(got, "|") != strings.Join(tt.want, "|")) {
			t.Errorf("%s: %q %v, want %q %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzArraySpans: for every JSON array of objects, the spans are the
// elements encoding/json finds.
func FuzzArraySpans(f *testing.F) {
	for _, s := range []string{`[]`, `[{"a":"x\"}"},{"b":[1,{"c":"\\"}]}]`, `[{"priority":1,"match":{"calling":"+1"}}]`, `[{"a":"]"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var elems []json.RawMessage
		if err := json.Unmarshal([]byte(in), &elems); err != nil || elems == nil {
			return
		}
		for _, e := range elems {
			if len(e) == 0 || e[0] != '{' {
				return
			}
		}
		spans, ok := arraySpans([]byte(in))
		if !ok || len(spans) != len(elems) {
			t.Fatalf("%q: %d spans %v, json finds %d", in, len(spans), ok, len(elems))
		}
		for i, sp := range spans {
			if in[sp[0]:sp[1]] != string(elems[i]) {
				t.Fatalf("%q: span %d is %q, json %q", in, i, in[sp[0]:sp[1]], elems[i])
			}
		}
	})
}

// A list edit compiles the lists alone: the rules are not compiled again.
func TestListsChangedAlone(t *testing.T) {
	e, live, reg := incrementalEnv(t)
	reloads := func(scope string) float64 {
		return testutil.ToFloat64(mustCounter(t, reg, "signalbox_policy_reloads_total", scope))
	}
	settle := func() {
		t.Helper()
		testkit.WaitFor(t, 5*time.Second, "change live", func() bool { return live.Version() == e.configVersion() })
	}
	step := func(calling string) string {
		var ev struct{ Decision callpolicy.Decision }
		e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate", fmt.Sprintf(`{"calling":%q,"called":"1"}`, calling)).decode(t, &ev)
		return string(ev.Decision.Step) + fmt.Sprint(ev.Decision.RuleID != 0)
	}
	e.must(http.StatusOK, "PUT", "/api/v1/policies/default/rules", bulkBody(2000, func(int) string { return "" }))
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"fraud","name":"Fraud","kind":"block"}`)
	e.must(http.StatusCreated, "POST", "/api/v1/lists", `{"id":"vip","name":"VIP","kind":"group"}`)
	settle()
	all := reloads("all")
	e.must(http.StatusCreated, "POST", "/api/v1/policies/default/lists/block/entries", `{"calling":"+19720000001"}`)
	settle()
	e.must(http.StatusCreated, "POST", "/api/v1/lists/fraud/entries", `{"calling":"+19720000002"}`)
	settle()
	if step("+19720000001") != "block_listfalse" || step("+19720000002") != "block_listfalse" || step("+19720000003") != "ruletrue" {
		t.Errorf("decisions: %s %s %s", step("+19720000001"), step("+19720000002"), step("+19720000003"))
	}
	if reloads("lists") != 2 || reloads("all") != all {
		t.Errorf("reloads: lists %v, all %v (was %v)", reloads("lists"), reloads("all"), all)
	}
	// A group's numbers are in the rules that name it: everything is rebuilt.
	e.must(http.StatusCreated, "POST", "/api/v1/lists/vip/entries", `{"calling":"+1555"}`)
	settle()
	if reloads("all") != all+1 {
		t.Errorf("group change: all %v, want %v", reloads("all"), all+1)
	}
}
