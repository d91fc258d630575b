package callpolicy

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

func TestListActions(t *testing.T) {
	ivr := &Action{Decision: Divert, Destination: "8000", Reason: "chaperone"}
	cfg := PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: permit(),
			BlockAction: &Action{Decision: Deny, Announce: "call_rejected", Reason: "blocked"},
			AllowAction: &Action{Decision: Permit, Greeting: "welcome_vip"}},
		Allow: []ListEntry{{ID: 1, Calling: "+15550001"}},
		Block: []ListEntry{
			{ID: 2, Calling: "prefix:+1666"},
			{ID: 3, Calling: "+17770001", Action: ivr},
			{ID: 4, Calling: "+17770002", Action: &Action{Decision: Permit, Modify: &Modify{CallingName: "SPAM? +17770002"}}},
			{ID: 5, Calling: "+17770003", Action: &Action{Decision: Permit, Modify: &Modify{CallingName: "directory:corp"}}},
		},
	}
	s, err := CompileWith([]PolicyConfig{cfg}, lib(t, corpDir(t, "Suspected spam")))
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngineSnap(t, s)
	for _, tt := range []struct {
		calling string
		step    Step
		sent    string
	}{
		{"+15550001", StepAllowList, "continue greeting=welcome_vip"},
		{"+16660000", StepBlockList, "reject announce=call_rejected reason=blocked"},
		{"+17770001", StepBlockList, "divert 8000 reason=chaperone"},
		{"+17770002", StepBlockList, `continue modify calling_name="SPAM? +17770002"`},
		{"+17770003", StepBlockList, `continue modify calling_name="Suspected spam"`},
		{"+18880000", StepDefault, "continue"},
	} {
		d, _ := e.Evaluate("p", &Call{Calling: tt.calling, Called: "2000"}, t0)
		if d.Step != tt.step || d.Action.Sent() != tt.sent {
			t.Errorf("%s: %s %q, want %s %q", tt.calling, d.Step, d.Action.Sent(), tt.step, tt.sent)
		}
	}
	// Without list actions: continue and reject "blocked", as before.
	cfg.Policy.AllowAction, cfg.Policy.BlockAction = nil, nil
	cfg.Block = cfg.Block[:1]
	e = mustEngine(t, cfg)
	if d, _ := e.Evaluate("p", &Call{Calling: "+15550001"}, t0); d.Action.Sent() != "continue" {
		t.Errorf("allow default: %q", d.Action.Sent())
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "+16660001"}, t0); d.Action.Sent() != "reject reason=blocked" {
		t.Errorf("block default: %q", d.Action.Sent())
	}
	bad := ListEntry{Calling: "1", Action: &Action{Decision: Divert}}
	if err := ValidateEntry(&bad); err == nil || !strings.HasPrefix(err.Error(), "action.destination") {
		t.Errorf("entry action validated: %v", err)
	}
	badPol := Policy{ID: "p", DefaultAction: permit(), BlockAction: &Action{Decision: "maybe"}}
	if err := ValidatePolicy(&badPol); err == nil || !strings.HasPrefix(err.Error(), "block_action.decision") {
		t.Errorf("block action validated: %v", err)
	}
}

func mustEngineSnap(t testing.TB, s *Snapshot) *Engine {
	t.Helper()
	e := NewEngine(nil)
	e.Swap(s)
	return e
}

// A flood of one called number from rotating callers trips the per-called
// limit (with its own action and block time) although no caller repeats.
func TestRateLimitPerCalled(t *testing.T) {
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{
		PerCalling: &Limit{Calls: 2, WindowSeconds: 60},
		PerCalled: &Limit{Calls: 5, WindowSeconds: 60, BlockSeconds: 30,
			Action: &Action{Decision: Divert, Destination: "8000", Reason: "chaperone"}},
	}}}
	e := mustEngine(t, cfg)
	now := t0
	for i := range 5 {
		c := Call{Calling: "+1555000" + string(rune('0'+i)), Called: "5000", TransformedCalled: "+19725555000"}
		if d, _ := e.Evaluate("p", &c, now); d.Step != StepDefault {
			t.Fatalf("call %d: %+v", i, d)
		}
	}
	// The sixth call to the DID, from a new caller, in either form of it.
	d, _ := e.Evaluate("p", &Call{Calling: "+15559999", Called: "5000", TransformedCalled: "+19725555000"}, now)
	if d.Step != StepRateLimit || d.Action.Sent() != "divert 8000 reason=chaperone" || d.Form != "transformed_called" ||
		!strings.Contains(d.Reason, "to this called number") {
		t.Fatalf("flood: %+v", d)
	}
	// Another DID is not affected; the flooded one stays blocked for the
	// limit's own 30 s, not the window.
	if d, _ := e.Evaluate("p", &Call{Calling: "+15558888", Called: "5001"}, now); d.Step != StepDefault {
		t.Fatalf("other DID: %+v", d)
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "+15557777", TransformedCalled: "+19725555000"}, now.Add(29*time.Second)); d.Step != StepRateLimit {
		t.Fatalf("still blocked at 29 s: %+v", d)
	}
	// The per-calling limit still holds for a repeating caller.
	for i := range 3 {
		d, _ := e.Evaluate("p", &Call{Calling: "+15551111", Called: "6000" + string(rune('0'+i))}, now)
		if want := StepDefault; i == 2 {
			if d.Step != StepRateLimit || d.Action.Sent() != "reject reason=blocked" {
				t.Fatalf("per calling: %+v", d)
			}
		} else if d.Step != want {
			t.Fatalf("per calling %d: %+v", i, d)
		}
	}
	if n := testutil.ToFloat64(e.limited.WithLabelValues("p")); n != 3 {
		t.Errorf("signalbox_callpolicy_rate_limited_total = %v, want 3", n)
	}
	bad := Policy{ID: "p", DefaultAction: permit(), RateLimit: &RateLimit{PerCalled: &Limit{Calls: 1, WindowSeconds: 60, BlockSeconds: -1}}}
	if err := ValidatePolicy(&bad); err == nil || !strings.HasPrefix(err.Error(), "rate_limit.per_called.block_seconds") {
		t.Errorf("per_called validated: %v", err)
	}
}

// lib is a library of directories (and shared lists, compiled).
func lib(t testing.TB, dirs ...*directory.Table) *Library {
	t.Helper()
	l, err := NewLibrary(dirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
