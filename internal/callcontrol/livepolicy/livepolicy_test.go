package livepolicy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit"
)

type env struct {
	st  store.Store
	eng *callpolicy.Engine
	m   *Manager
	reg *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	eng := callpolicy.NewEngine(reg)
	m := New(Config{Engine: eng, Store: st, Registerer: reg, CheckEvery: 20 * time.Millisecond, HitsEvery: 20 * time.Millisecond})
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{st: st, eng: eng, m: m, reg: reg}
}

func (e *env) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (e *env) decide(calling string) string {
	d, ok := e.eng.Evaluate(callpolicy.DefaultPolicyID, &callpolicy.Call{Calling: calling, Called: "5000"}, time.Now())
	if !ok {
		return "no policy"
	}
	return d.Action.Decision
}

func (e *env) reloads(scope string) float64 {
	return testutil.ToFloat64(e.m.reloads.WithLabelValues(scope))
}

func denyRule(calling string) callpolicy.Rule {
	return callpolicy.Rule{PolicyID: callpolicy.DefaultPolicyID, Priority: 1, Enabled: true,
		Match: callpolicy.Match{Calling: calling}, Action: callpolicy.Action{Decision: callpolicy.Deny}}
}

// A change committed without telling the manager (as another node's is)
// goes live through the periodic version check; Changed serves it at once.
func TestChangesGoLive(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := context.Background()
	if got := e.decide("111"); got != callpolicy.Permit {
		t.Fatalf("before any rule: %s", got)
	}
	r := denyRule("111")
	if err := e.st.CreateRule(ctx, &r); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the version check to load the rule", func() bool { return e.decide("111") == callpolicy.Deny })
	v, _ := e.st.ConfigVersion(ctx)
	if e.m.Version() != v {
		t.Errorf("live version %d, stored %d", e.m.Version(), v)
	}
	r2 := denyRule("222")
	if err := e.st.CreateRule(ctx, &r2); err != nil {
		t.Fatal(err)
	}
	e.m.Changed()
	testkit.WaitFor(t, 10*time.Second, "Changed to load the rule", func() bool { return e.decide("222") == callpolicy.Deny })
}

// A bulk replacement goes live by recompiling its one policy (scope
// "policy", no full reload); a failed write leaves the live snapshot.
func TestReplacingRecompilesOnePolicy(t *testing.T) {
	e := newEnv(t)
	e.run(t)
	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, "the first check", func() bool { v, _ := e.st.ConfigVersion(ctx); return e.m.Version() == v })
	allBefore := e.reloads("all")

	rules := []callpolicy.Rule{denyRule("333")}
	// As the API does: handed over once the store has set the ids.
	var done func(bool)
	if err := e.st.ReplaceRules(ctx, callpolicy.DefaultPolicyID, rules, func() {
		done = e.m.Replacing(callpolicy.DefaultPolicyID, rules)
	}); err != nil {
		t.Fatal(err)
	}
	done(true)
	testkit.WaitFor(t, 10*time.Second, "the replacement to go live", func() bool { return e.decide("333") == callpolicy.Deny })
	if got := e.reloads("policy"); got != 1 {
		t.Errorf("policy reloads %v, want 1", got)
	}
	if got := e.reloads("all"); got != allBefore {
		t.Errorf("full reloads %v -> %v, want none", allBefore, got)
	}

	failed := e.m.Replacing(callpolicy.DefaultPolicyID, []callpolicy.Rule{denyRule("444")})
	failed(false)
	time.Sleep(100 * time.Millisecond) // five version checks
	if got := e.decide("444"); got != callpolicy.Permit {
		t.Errorf("a failed replacement went live: %s", got)
	}
	if e.m.replacing.Load() != 0 {
		t.Errorf("replacing = %d after both ended", e.m.replacing.Load())
	}
}

// Hit counts reach the store, by the periodic flush and by FlushHits.
func TestHitsPersisted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := denyRule("555")
	if err := e.st.CreateRule(ctx, &r); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := e.decide("555"); got != callpolicy.Deny {
			t.Fatalf("decision %s", got)
		}
	}
	e.m.FlushHits(ctx)
	got, err := e.st.GetRule(ctx, r.ID)
	if err != nil || got.Hits != 3 {
		t.Fatalf("hits %d after FlushHits, err %v; want 3", got.Hits, err)
	}
	e.run(t)
	e.decide("555")
	testkit.WaitFor(t, 10*time.Second, "the periodic flush", func() bool { g, _ := e.st.GetRule(ctx, r.ID); return g.Hits == 4 })
}
