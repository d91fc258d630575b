package callpolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fmtReason is the reason format as fmt would write it; appendRuleReason
// must produce exactly this, since operators match on decision reasons.
func fmtReason(r *Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %d (priority %d)", r.ID, r.Priority)
	if r.Description != "" {
		d := r.Description
		if len(d) > 80 {
			d = d[:80] + "…"
		}
		fmt.Fprintf(&b, " %q", d)
	}
	b.WriteString(" matched")
	return b.String()
}

func TestRuleReasonFormat(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
	}{
		{"no description", Rule{ID: 7, Priority: 10}},
		{"negative priority", Rule{ID: 1, Priority: -3}},
		{"quotes and control", Rule{ID: 2, Priority: 0, Description: "say \"hi\"\n\tnow\x00"}},
		{"unicode", Rule{ID: 3, Priority: 1, Description: "appel entrant – bloqué ☎"}},
		{"long, cut inside a rune", Rule{ID: 4, Priority: 2, Description: strings.Repeat("é", 60)}},
		{"invalid utf-8", Rule{ID: 5, Priority: 3, Description: "a\xffb"}},
		{"exactly 80", Rule{ID: 6, Priority: 4, Description: strings.Repeat("x", 80)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := string(appendRuleReason(nil, &tt.rule)), fmtReason(&tt.rule); got != want {
				t.Errorf("reason %q, want %q", got, want)
			}
		})
	}
}

// TestCompiledReasons checks that the reasons sliced out of the shared
// buffer belong to their own rules, in rank order.
func TestCompiledReasons(t *testing.T) {
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()}}
	for i := range 50 {
		cfg.Rules = append(cfg.Rules, Rule{ID: int64(100 - i), Priority: i % 7, Enabled: true,
			Match:       Match{Calling: fmt.Sprintf("+1555%07d", i)},
			Action:      deny(),
			Description: strings.Repeat("d", i)})
	}
	snap, err := Compile([]PolicyConfig{cfg})
	if err != nil {
		t.Fatal(err)
	}
	p := snap.policies["p"]
	for _, r := range cfg.Rules {
		found := false
		for _, cr := range p.rules {
			if cr.id == r.ID {
				found = true
				if want := fmtReason(&r); cr.reason != want {
					t.Errorf("rule %d: reason %q, want %q", r.ID, cr.reason, want)
				}
			}
		}
		if !found {
			t.Errorf("rule %d not compiled", r.ID)
		}
	}
	e := NewEngine(nil)
	e.Swap(snap)
	d, ok := e.DryRun("p", &Call{Calling: "+15550000049"}, time.Now())
	if !ok || d.RuleID != 51 || d.Reason != fmtReason(&cfg.Rules[49]) {
		t.Errorf("decision %+v, want rule 51 with its reason", d)
	}
}

func TestActionSent(t *testing.T) {
	for _, tc := range []struct {
		a    Action
		want string
	}{
		{Action{Decision: Permit}, "continue"},
		{Action{Decision: Permit, Greeting: "in_meeting", Modify: &Modify{CallingNumber: "+1555", CallingName: `Smith "&" Sons`}},
			`continue modify calling_number=+1555 calling_name="Smith \"&\" Sons" greeting=in_meeting`},
		{Action{Decision: Divert, Destination: "voiceMail", Reason: "chaperone", ResetCallHistory: "resetAllHops"},
			"divert voiceMail reset_call_history=resetAllHops reason=chaperone"},
		{Action{Decision: Deny}, "reject"},
		{Action{Decision: Deny, Reason: "blocked"}, "reject reason=blocked"},
		{Action{Decision: Deny, Greeting: "user_unavailable", Reason: "unavailable"}, "reject announce=user_unavailable reason=unavailable"},
	} {
		if got := tc.a.Sent(); got != tc.want {
			t.Errorf("Sent() = %s\n        want %s", got, tc.want)
		}
	}
}
