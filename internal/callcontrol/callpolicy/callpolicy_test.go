package callpolicy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC) // a Wednesday

func tp(t time.Time) *time.Time { return &t }

func permit() Action { return Action{Decision: Permit} }
func deny() Action   { return Action{Decision: Deny, Reason: "blocked"} }

func mustEngine(t testing.TB, cfgs ...PolicyConfig) *Engine {
	t.Helper()
	s, err := Compile(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(prometheus.NewRegistry())
	e.Swap(s)
	return e
}

func TestEvaluationOrder(t *testing.T) {
	cfg := PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: permit(),
			RateLimit: &RateLimit{PerCalling: &Limit{Calls: 1, WindowSeconds: 60}}},
		Rules: []Rule{
			{ID: 10, Priority: 5, Enabled: true, Match: Match{Called: "prefix:1900"}, Action: deny()},
			{ID: 3, Priority: 5, Enabled: true, Match: Match{Called: "19005550000"}, Action: Action{Decision: Divert, Destination: "voiceMail"}},
			{ID: 1, Priority: 1, Enabled: false, Match: Match{}, Action: deny()},
			{ID: 20, Priority: 9, Enabled: true, Match: Match{Calling: "regex:^\\+44"}, Action: deny()},
		},
		Allow: []ListEntry{{ID: 7, Calling: "+15550001"}},
		Block: []ListEntry{{ID: 8, Calling: "+15550001"}, {ID: 9, Calling: "prefix:+1666"}, {ID: 5, Calling: "prefix:+1666", Called: "911"}},
	}
	tests := []struct {
		name   string
		call   Call
		step   Step
		rule   int64
		entry  int64
		action string
	}{
		{"allow beats block", Call{Calling: "+15550001", Called: "19005550000"}, StepAllowList, 0, 7, Permit},
		{"block list", Call{Calling: "+16660000", Called: "123"}, StepBlockList, 0, 9, Deny},
		{"lowest entry id wins", Call{Calling: "+16660000", Called: "911"}, StepBlockList, 0, 5, Deny},
		{"rate limit after lists", Call{Calling: "+17770000", Called: "1"}, StepDefault, 0, 0, Permit},
		{"rate limited", Call{Calling: "+17770000", Called: "1"}, StepRateLimit, 0, 0, Deny},
		{"priority tie: lower id", Call{Calling: "+18880000", Called: "19005550000"}, StepRule, 3, 0, Divert},
		{"prefix rule", Call{Calling: "+18880001", Called: "19001"}, StepRule, 10, 0, Deny},
		{"regex rule", Call{Calling: "+4420", Called: "5"}, StepRule, 20, 0, Deny},
		{"default", Call{Calling: "+18880002", Called: "5"}, StepDefault, 0, 0, Permit},
	}
	e := mustEngine(t, cfg)
	for _, tt := range tests {
		d, ok := e.Evaluate("p", &tt.call, t0)
		if !ok {
			t.Fatalf("%s: policy not found", tt.name)
		}
		if d.Step != tt.step || d.RuleID != tt.rule || d.EntryID != tt.entry || d.Action.Decision != tt.action || d.Policy != "p" || d.Reason == "" {
			t.Errorf("%s: got %+v, want step %s rule %d entry %d %s", tt.name, d, tt.step, tt.rule, tt.entry, tt.action)
		}
	}
	if _, ok := e.Evaluate("nope", &Call{}, t0); ok {
		t.Error("unknown policy found")
	}
}

func TestMatchKinds(t *testing.T) {
	rules := []Rule{
		{ID: 1, Priority: 1, Enabled: true, Match: Match{TriggerPoint: "originating", DeviceName: "SEP001122334455"}, Action: deny()},
		{ID: 2, Priority: 2, Enabled: true, Match: Match{TransformedCalled: "pattern:9.011!"}, Action: deny()},
		{ID: 3, Priority: 3, Enabled: true, Match: Match{TransformedCalling: "pattern:\\+1[2-9]XX[^0]XXXXXX"}, Action: deny()},
		{ID: 4, Priority: 4, Enabled: true, Match: Match{Calling: "+14155550100", Called: "prefix:1800"}, Action: deny()},
		{ID: 5, Priority: 5, Enabled: true, Match: Match{DeviceName: "regex:(?i)^sep"}, Action: deny()},
	}
	e := mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()}, Rules: rules})
	tests := []struct {
		call Call
		want int64
	}{
		{Call{TriggerPoint: "ORIGINATING", DeviceName: "SEP001122334455"}, 1},
		{Call{TriggerPoint: "originating", DeviceName: "sep001122334455"}, 5}, // device_name exact is case-sensitive
		{Call{TransformedCalled: "9011442071234567"}, 2},
		{Call{TransformedCalled: "9011"}, 0},
		{Call{TransformedCalling: "+14155550100"}, 3},
		{Call{TransformedCalling: "+14150550100"}, 0},
		{Call{Calling: "+14155550100", Called: "18005551234"}, 4},
		{Call{Calling: "+14155550100", Called: "18885551234"}, 0},
		{Call{DeviceName: "CSFjdoe"}, 0},
	}
	for _, tt := range tests {
		d, _ := e.DryRun("p", &tt.call, t0)
		if d.RuleID != tt.want {
			t.Errorf("%+v: rule %d, want %d", tt.call, d.RuleID, tt.want)
		}
	}
}

func TestScheduleAndExpiry(t *testing.T) {
	ny := "America/New_York"
	exp := time.Date(2026, 1, 3, 12, 0, 0, 0, time.UTC) // a Saturday, outside every schedule below
	rules := []Rule{
		{ID: 1, Priority: 1, Enabled: true, ExpiresAt: tp(exp), Action: deny()},
		{ID: 2, Priority: 2, Enabled: true, Schedule: &Schedule{Days: []string{"fri"}, From: "22:00", To: "06:00", TimeZone: "Europe/Paris"}, Action: deny()},
		{ID: 3, Priority: 3, Enabled: true, Schedule: &Schedule{Days: []string{"sun"}, From: "01:00", To: "03:00", TimeZone: ny}, Action: deny()},
		{ID: 4, Priority: 4, Enabled: true, Schedule: &Schedule{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "09:00", To: "17:00", TimeZone: "Asia/Tokyo"}, Action: deny()},
	}
	e := mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()}, Rules: rules})
	tests := []struct {
		name string
		at   time.Time
		want int64
	}{
		{"before expiry", exp.Add(-time.Second), 1},
		{"at expiry", exp, 0},
		{"fri 23:00 Paris (22:00 UTC)", time.Date(2026, 3, 6, 22, 0, 0, 0, time.UTC), 2},
		{"sat 05:59 Paris spans midnight", time.Date(2026, 3, 7, 4, 59, 0, 0, time.UTC), 2},
		{"sat 06:00 Paris: to is exclusive", time.Date(2026, 3, 7, 5, 0, 0, 0, time.UTC), 0},
		{"thu 23:00 Paris: wrong start day", time.Date(2026, 3, 5, 22, 0, 0, 0, time.UTC), 0},
		{"sat 23:00 Paris: wrong start day", time.Date(2026, 3, 7, 22, 0, 0, 0, time.UTC), 0},
		// 2026-03-08 is the US spring-forward Sunday: 02:00 EST jumps to 03:00 EDT.
		{"DST day 01:30 EST", time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC), 3},
		{"DST day 01:59 EST", time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC), 3},
		{"DST day 03:00 EDT (one hour later)", time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), 0},
		{"sun before DST 02:30 EST", time.Date(2026, 3, 1, 7, 30, 0, 0, time.UTC), 3},
		// 2026-11-01 fall back: 01:00-02:00 happens twice, both inside.
		{"fall back first 01:30 EDT", time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), 3},
		{"fall back second 01:30 EST", time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), 3},
		{"wed 10:00 Tokyo (01:00 UTC)", time.Date(2026, 3, 4, 1, 0, 0, 0, time.UTC), 4},
		{"wed 17:00 Tokyo", time.Date(2026, 3, 4, 8, 0, 0, 0, time.UTC), 0},
		{"sun 10:00 Tokyo", time.Date(2026, 3, 8, 1, 0, 0, 0, time.UTC), 0},
	}
	for _, tt := range tests {
		d, _ := e.DryRun("p", &Call{Calling: "1"}, tt.at)
		if d.RuleID != tt.want {
			t.Errorf("%s: rule %d (%s), want %d", tt.name, d.RuleID, d.Reason, tt.want)
		}
	}
}

func TestListExpiry(t *testing.T) {
	e := mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()},
		Block: []ListEntry{{ID: 1, Calling: "pattern:+1666XXXXXXX", ExpiresAt: tp(t0)}}})
	c := &Call{Calling: "+16661234567"}
	if d, _ := e.DryRun("p", c, t0.Add(-time.Minute)); d.Step != StepBlockList {
		t.Errorf("before expiry: %+v", d)
	}
	if d, _ := e.DryRun("p", c, t0); d.Step != StepDefault {
		t.Errorf("at expiry: %+v", d)
	}
}

func TestRateLimit(t *testing.T) {
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{
		PerCalling: &Limit{Calls: 3, WindowSeconds: 10}, BlockSeconds: 30,
		Action: &Action{Decision: Divert, Destination: "5000", Reason: "blocked"}}}}
	e := mustEngine(t, cfg)
	a := &Call{Calling: "+1555"}
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	steps := []struct {
		call    *Call
		sec     float64
		limited bool
	}{
		{a, 0, false}, {a, 1, false}, {a, 2, false},
		{a, 3, true},                        // 4th within 10 s
		{&Call{Calling: "+1666"}, 3, false}, // other number unaffected
		{a, 20, true},                       // still blocked (30 s from t=3)
		{a, 33, false},                      // block over, old windows aged out
		{a, 34, false}, {a, 35, false}, {a, 36, true},
	}
	for i, s := range steps {
		d, _ := e.Evaluate("p", s.call, at(s.sec))
		if got := d.Step == StepRateLimit; got != s.limited {
			t.Fatalf("step %d (t=%v %s): limited %v, want %v (%+v)", i, s.sec, s.call.Calling, got, s.limited, d)
		}
		if s.limited && (d.Action.Decision != Divert || d.Action.Destination != "5000") {
			t.Fatalf("step %d: action %+v", i, d.Action)
		}
	}

	// Overall limit, default action deny/blocked, block = window.
	e = mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{Overall: &Limit{Calls: 2, WindowSeconds: 5}}}})
	for i, want := range []bool{false, false, true} {
		d, _ := e.Evaluate("p", &Call{Calling: string(rune('1' + i))}, t0)
		if (d.Step == StepRateLimit) != want {
			t.Fatalf("overall call %d: %+v", i, d)
		}
		if want && (d.Action.Decision != Deny || d.Action.Reason != "blocked") {
			t.Fatalf("default limit action %+v", d.Action)
		}
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "9"}, t0.Add(4*time.Second)); d.Step != StepRateLimit {
		t.Fatalf("within block: %+v", d)
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "9"}, t0.Add(11*time.Second)); d.Step != StepDefault {
		t.Fatalf("after block: %+v", d)
	}
}

func TestRateLimitMemoryBounded(t *testing.T) {
	l := newLimiter()
	lim := &Limit{Calls: 5, WindowSeconds: 60}
	now := t0.UnixNano()
	for i := 0; i < limShards*shardCap*5/4; i++ {
		l.take(limKey{policy: "p", number: string(rune(i))}, lim, 0, now, true)
	}
	if n := l.size(); n > limShards*shardCap {
		t.Fatalf("%d keys, cap %d", n, limShards*shardCap)
	}
}

func TestDryRunNoSideEffects(t *testing.T) {
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{PerCalling: &Limit{Calls: 1, WindowSeconds: 60}}},
		Rules: []Rule{{ID: 1, Enabled: true, Match: Match{Called: "5"}, Action: deny()}}}
	e := mustEngine(t, cfg)
	c := &Call{Calling: "1", Called: "5"}
	for range 5 {
		if d, _ := e.DryRun("p", c, t0); d.RuleID != 1 {
			t.Fatalf("dry run: %+v", d)
		}
	}
	if h := e.DrainHits(); len(h) != 0 {
		t.Fatalf("dry run counted hits: %v", h)
	}
	if n := e.lim.size(); n != 0 {
		t.Fatalf("dry run created %d limiter entries", n)
	}
	if d, _ := e.Evaluate("p", c, t0); d.RuleID != 1 {
		t.Fatalf("live: %+v", d)
	}
	// Now the next call would exceed: dry run says so without counting.
	for range 3 {
		if d, _ := e.DryRun("p", c, t0); d.Step != StepRateLimit {
			t.Fatalf("dry run after limit: %+v", d)
		}
	}
	if d, _ := e.Evaluate("p", c, t0); d.Step != StepRateLimit {
		t.Fatalf("live after limit: %+v", d)
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "2", Called: "5"}, t0.Add(time.Second)); d.RuleID != 1 {
		t.Fatalf("second number: %+v", d)
	}
}

func TestHitsSurviveSwap(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := NewEngine(reg)
	rules := []Rule{
		{ID: 1, Priority: 1, Enabled: true, Match: Match{Called: "1"}, Action: deny()},
		{ID: 2, Priority: 2, Enabled: true, Match: Match{Called: "2"}, Action: deny()},
	}
	s, err := Compile([]PolicyConfig{{Policy: Policy{ID: "p", DefaultAction: permit()}, Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(s)
	e.Evaluate("p", &Call{Called: "1"}, t0)
	e.Evaluate("p", &Call{Called: "1"}, t0.Add(time.Second))
	e.Evaluate("p", &Call{Called: "2"}, t0)
	// Rule 2 is deleted, rule 1 changes priority.
	rules = []Rule{{ID: 1, Priority: 7, Enabled: true, Match: Match{Called: "1"}, Action: deny()}}
	s2, err := Compile([]PolicyConfig{{Policy: Policy{ID: "p", DefaultAction: permit()}, Rules: rules}})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(s2)
	e.Evaluate("p", &Call{Called: "1"}, t0.Add(2*time.Second))
	h := e.DrainHits()
	if len(h) != 1 || h[1].Count != 3 || !h[1].Last.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("hits %+v", h)
	}
	if h := e.DrainHits(); len(h) != 0 {
		t.Fatalf("second drain %+v", h)
	}
	var m dto.Metric
	if err := e.ruleHits.WithLabelValues("p").Write(&m); err != nil || m.GetCounter().GetValue() != 4 {
		t.Fatalf("rule_hits_total = %v (%v), want 4", m.GetCounter().GetValue(), err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "signalbox_callpolicy_snapshot_build_seconds" {
			found = mf.GetMetric()[0].GetHistogram().GetSampleCount() == 2
		}
	}
	if !found {
		t.Fatal("snapshot_build_seconds missing or not observed twice")
	}
}

func TestValidation(t *testing.T) {
	rule := func(mod func(r *Rule)) *Rule {
		r := &Rule{ID: 1, Enabled: true, Action: permit()}
		mod(r)
		return r
	}
	tests := []struct {
		name  string
		err   error
		field string
		msg   string
	}{
		{"ok", ValidateRule(rule(func(r *Rule) {})), "", ""},
		{"lookahead", ValidateRule(rule(func(r *Rule) { r.Match.Calling = "regex:^\\+(?!1)" })), "match.calling", "regex: invalid or unsupported Perl syntax: `(?!`"},
		{"bad pattern", ValidateRule(rule(func(r *Rule) { r.Match.Called = "pattern:9.1[2-9]XX?" })), "match.called", "pattern: unsupported character '?' at position 11"},
		{"bad exact", ValidateRule(rule(func(r *Rule) { r.Match.TransformedCalled = "12-34" })), "match.transformed_called", "position 3"},
		{"no decision", ValidateRule(rule(func(r *Rule) { r.Action = Action{} })), "action.decision", "required"},
		{"divert no dest", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Divert} })), "action.destination", "required"},
		{"divert bad dest", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Divert, Destination: "12 34"} })), "action.destination", "not a number"},
		{"divert vm", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Divert, Destination: "voiceMail"} })), "", ""},
		{"bad reason", ValidateRule(rule(func(r *Rule) { r.Action.Reason = "busy" })), "action.reason", "not one of"},
		{"greeting on deny", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Deny, Greeting: "g1"} })), "action.greeting", "only with permit"},
		{"announce on permit", ValidateRule(rule(func(r *Rule) { r.Action.Announce = "a1" })), "action.announce", "only with deny"},
		{"bad announce id", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Deny, Announce: "a b"} })), "action.announce", "not an identifier"},
		{"modify on deny", ValidateRule(rule(func(r *Rule) { r.Action = Action{Decision: Deny, Modify: &Modify{CallingNumber: "1"}} })), "action.modify", "only with permit or divert"},
		{"modify bad number", ValidateRule(rule(func(r *Rule) { r.Action.Modify = &Modify{CalledNumber: "1x"} })), "action.modify.called_number", "not a number"},
		{"bad reset", ValidateRule(rule(func(r *Rule) { r.Action.ResetCallHistory = "all" })), "action.reset_call_history", "resetLastHop"},
		{"bad day", ValidateRule(rule(func(r *Rule) { r.Schedule = &Schedule{Days: []string{"mon", "funday"}} })), "schedule.days[1]", "not one of"},
		{"bad time", ValidateRule(rule(func(r *Rule) { r.Schedule = &Schedule{From: "24:00", To: "01:00"} })), "schedule.from", "HH:MM"},
		{"from without to", ValidateRule(rule(func(r *Rule) { r.Schedule = &Schedule{From: "08:00"} })), "schedule", "together"},
		{"bad zone", ValidateRule(rule(func(r *Rule) { r.Schedule = &Schedule{TimeZone: "Mars/Olympus"} })), "schedule.time_zone", "IANA"},
		{"policy id", ValidatePolicy(&Policy{ID: "Bad ID", DefaultAction: permit()}), "id", "slug"},
		{"policy default", ValidatePolicy(&Policy{ID: "p", DefaultAction: Action{Decision: "maybe"}}), "default_action.decision", "not permit"},
		{"limit calls", ValidatePolicy(&Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{PerCalling: &Limit{Calls: 0, WindowSeconds: 1}}}), "rate_limit.per_calling.calls", "out of range"},
		{"limit action", ValidatePolicy(&Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{Overall: &Limit{Calls: 1, WindowSeconds: 1}, Action: &Action{Decision: Divert}}}), "rate_limit.action.destination", "required"},
		{"entry no calling", ValidateEntry(&ListEntry{Called: "1"}), "calling", "required"},
		{"entry regex", ValidateEntry(&ListEntry{Calling: "regex:^1"}), "calling", "not allowed"},
		{"entry bad called", ValidateEntry(&ListEntry{Calling: "1", Called: "prefix:x"}), "called", "prefix: unexpected 'x'"},
	}
	for _, tt := range tests {
		if tt.field == "" {
			if tt.err != nil {
				t.Errorf("%s: unexpected %v", tt.name, tt.err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(tt.err, &fe) {
			t.Errorf("%s: err %v is not a FieldError", tt.name, tt.err)
			continue
		}
		if fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msg) {
			t.Errorf("%s: got %q / %q, want %q / containing %q", tt.name, fe.Field, fe.Msg, tt.field, tt.msg)
		}
	}
}

func TestCompileErrorNamesPolicyAndRule(t *testing.T) {
	_, err := Compile([]PolicyConfig{{Policy: Policy{ID: "sales", DefaultAction: permit()},
		Rules: []Rule{{ID: 42, Enabled: true, Match: Match{Calling: "regex:(a)\\1"}, Action: permit()}}}})
	var fe *FieldError
	if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), `policy "sales": rule 42: match.calling: regex:`) {
		t.Fatalf("err = %v", err)
	}
	_, err = Compile([]PolicyConfig{{Policy: Policy{ID: "p", DefaultAction: permit()}, Block: []ListEntry{{ID: 3, Calling: ""}}}})
	if err == nil || err.Error() != `policy "p": block list entry 3: calling: required` {
		t.Fatalf("err = %v", err)
	}
	_, err = Compile([]PolicyConfig{{Policy: Policy{ID: "p", DefaultAction: permit()}}, {Policy: Policy{ID: "p", DefaultAction: permit()}}})
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v", err)
	}
}

func TestWithPolicyReplacesOnePolicy(t *testing.T) {
	deny := Action{Decision: Deny, Reason: "blocked"}
	old, err := Compile([]PolicyConfig{
		{Policy: Policy{ID: "a", DefaultAction: permit()}, Rules: []Rule{{ID: 1, Enabled: true, Match: Match{Calling: "100"}, Action: deny}}},
		{Policy: Policy{ID: "b", DefaultAction: permit()}, Rules: []Rule{{ID: 2, Enabled: true, Match: Match{Calling: "200"}, Action: deny}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := withPolicy(old, &PolicyConfig{Policy: Policy{ID: "a", DefaultAction: permit()},
		Rules: []Rule{{ID: 3, Enabled: true, Match: Match{Calling: "300"}, Action: deny}}})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(nil)
	decide := func(s *Snapshot, pol, calling string) string {
		e.Swap(s)
		d, ok := e.DryRun(pol, &Call{Calling: calling, Called: "1"}, time.Now())
		if !ok {
			t.Fatalf("policy %s missing", pol)
		}
		return d.Action.Decision
	}
	if decide(n, "a", "300") != Deny || decide(n, "a", "100") != Permit || decide(n, "b", "200") != Deny {
		t.Error("new snapshot: policy a not replaced or policy b lost")
	}
	if n.policies["b"] != old.policies["b"] {
		t.Error("policy b was recompiled; it should be shared")
	}
	if decide(old, "a", "100") != Deny || decide(old, "a", "300") != Permit {
		t.Error("the old snapshot changed")
	}
	if _, err := withPolicy(old, &PolicyConfig{Policy: Policy{ID: "a", DefaultAction: permit()},
		Rules: []Rule{{ID: 4, Enabled: true, Match: Match{Calling: "regex:(a)\\1"}, Action: deny}}}); err == nil {
		t.Error("an invalid rule compiled")
	}
}

// TestSwapSharedPolicyWhileEvaluating: swapping in a snapshot made by
// Snapshot.With leaves the policies it shares with the live one untouched
// while calls evaluate them (the race detector checks this), and their
// undrained hits survive the swap.
func TestSwapSharedPolicyWhileEvaluating(t *testing.T) {
	e := NewEngine(prometheus.NewRegistry())
	cur, err := Compile([]PolicyConfig{
		{Policy: Policy{ID: "a", DefaultAction: permit()}, Rules: []Rule{{ID: 1, Enabled: true, Match: Match{Calling: "100"}, Action: deny()}}},
		{Policy: Policy{ID: "b", DefaultAction: permit()}, Rules: []Rule{{ID: 2, Enabled: true, Match: Match{Calling: "200"}, Action: deny()}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(cur)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if d, ok := e.Evaluate("b", &Call{Calling: "200", Called: "1"}, time.Now()); !ok || d.RuleID != 2 {
				t.Errorf("policy b: %+v %v", d, ok)
			}
			n++
		}
	}()
	for i := range 200 {
		next, err := withPolicy(cur, &PolicyConfig{Policy: Policy{ID: "a", DefaultAction: permit()},
			Rules: []Rule{{ID: int64(10 + i), Enabled: true, Match: Match{Calling: "100"}, Action: deny()}}})
		if err != nil {
			t.Fatal(err)
		}
		e.Swap(next)
		cur = next
	}
	close(stop)
	n := <-done
	if got := e.DrainHits()[2].Count; got != int64(n) {
		t.Errorf("policy b rule hits = %d, want %d (one per call)", got, n)
	}
}

// withPolicy compiles cfg's policy and puts it into s, as the app does for
// a bulk replacement.
func withPolicy(s *Snapshot, cfg *PolicyConfig) (*Snapshot, error) {
	cp, err := CompilePolicy(cfg, nil)
	if err != nil {
		return nil, err
	}
	return s.With(cp), nil
}

// CUCM sends the calling number as the trigger point saw it and, in
// transformedcgpn, usually globalized; lists keyed in either form match a
// call presenting the other, and a withheld number matches "anonymous".
func TestListsMatchEitherFormAndAnonymous(t *testing.T) {
	e := mustEngine(t, PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: permit()},
		Rules: []Rule{
			{ID: 1, Priority: 1, Enabled: true, Match: Match{Calling: Anonymous, Called: "911"}, Action: permit()},
			{ID: 2, Priority: 2, Enabled: true, Match: Match{TransformedCalling: Anonymous, Calling: "prefix:8"},
				Action: Action{Decision: Divert, Destination: "5000"}},
		},
		Block: []ListEntry{
			{ID: 10, Calling: "+13222000111"},
			{ID: 11, Calling: "4000", Called: "+4930123"},
			{ID: 12, Calling: Anonymous},
		},
	})
	tests := []struct {
		name  string
		call  Call
		step  Step
		id    int64
		form  string
		allow bool
	}{
		{"E.164 entry, local calling, globalized transformed",
			Call{Calling: "3222000111", TransformedCalling: "+13222000111", Called: "5"}, StepBlockList, 10, "transformed_calling", false},
		{"E.164 entry, E.164 calling", Call{Calling: "+13222000111", Called: "5"}, StepBlockList, 10, "calling", false},
		{"called in its transformed form",
			Call{Calling: "4000", Called: "30123", TransformedCalled: "+4930123"}, StepBlockList, 11, "calling+transformed_called", false},
		{"calling and called both transformed",
			Call{Calling: "04000", TransformedCalling: "4000", Called: "30123", TransformedCalled: "+4930123"}, StepBlockList, 11,
			"transformed_calling+transformed_called", false},
		{"withheld caller is blocked", Call{Called: "5"}, StepBlockList, 12, "calling", false},
		{"an empty calling number with a transformed one is not anonymous",
			Call{TransformedCalling: "+13222000111", Called: "5"}, StepBlockList, 10, "transformed_calling", false},
		{"other numbers pass", Call{Calling: "3222000112", TransformedCalling: "+13222000112", Called: "5"}, StepDefault, 0, "", true},
	}
	for _, tc := range tests {
		d, ok := e.DryRun("p", &tc.call, t0)
		if !ok || d.Step != tc.step || d.EntryID != tc.id || d.Form != tc.form || (d.Action.Decision == Permit) != tc.allow {
			t.Errorf("%s: got step %s entry %d form %q %s; want %s %d %q", tc.name, d.Step, d.EntryID, d.Form, d.Action.Decision, tc.step, tc.id, tc.form)
		}
	}

	// Rules name their fields: "anonymous" in calling holds for an empty
	// calling field. The block list is empty here, so rules decide.
	e = mustEngine(t, PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: deny()},
		Rules: []Rule{
			{ID: 1, Priority: 1, Enabled: true, Match: Match{Calling: Anonymous, Called: "911"}, Action: permit()},
			{ID: 2, Priority: 2, Enabled: true, Match: Match{TransformedCalling: Anonymous, Calling: "prefix:8"},
				Action: Action{Decision: Divert, Destination: "5000"}},
		},
	})
	for _, tc := range []struct {
		call Call
		rule int64
	}{
		{Call{Called: "911"}, 1},
		{Call{Called: "912"}, 0},
		{Call{Calling: "8123", Called: "1"}, 2},
		{Call{Calling: "8123", TransformedCalling: "+18123", Called: "1"}, 0},
	} {
		if d, _ := e.DryRun("p", &tc.call, t0); d.RuleID != tc.rule {
			t.Errorf("%+v: rule %d (%s), want %d", tc.call, d.RuleID, d.Step, tc.rule)
		}
	}
}

// One caller presented in both forms is one caller to the rate limit.
func TestRateLimitKeyIsTheGlobalizedNumber(t *testing.T) {
	e := mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit(),
		RateLimit: &RateLimit{PerCalling: &Limit{Calls: 2, WindowSeconds: 60}}}})
	calls := []Call{
		{Calling: "3222000111", TransformedCalling: "+13222000111", Called: "1"},
		{Calling: "+13222000111", Called: "1"},
		{Calling: "93222000111", TransformedCalling: "+13222000111", Called: "1"},
	}
	for i := range calls {
		d, _ := e.Evaluate("p", &calls[i], t0.Add(time.Duration(i)*time.Second))
		if want := i == 2; (d.Step == StepRateLimit) != want {
			t.Fatalf("call %d: step %s; the third call of one number should be limited", i, d.Step)
		}
		if i == 2 && d.Form != "transformed_calling" {
			t.Errorf("form %q, want transformed_calling", d.Form)
		}
	}
	// Withheld callers share one count.
	for i := range 3 {
		d, _ := e.Evaluate("p", &Call{Called: "1"}, t0.Add(time.Duration(i)*time.Second))
		if want := i == 2; (d.Step == StepRateLimit) != want {
			t.Fatalf("anonymous call %d: step %s", i, d.Step)
		}
	}
}
