package callpolicy

import (
	"errors"
	"testing"
)

// TestNeighbourhoodSpoofing: a rule with the neighbourhood condition
// matches the callers of a spoofing test list — the called number's
// NPA-NXX, in every form CUCM sends — and none of the legitimate ones: the
// called number itself, another exchange, another country, anonymous. An
// allow-listed neighbour still gets through, and the rule's other fields
// still apply.
func TestNeighbourhoodSpoofing(t *testing.T) {
	e := mustEngine(t, PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: permit()},
		Rules: []Rule{
			{ID: 1, Priority: 1, Enabled: true, Match: Match{Neighbourhood: &Neighbourhood{}}, Action: deny(), Description: "neighbourhood spoofing"},
			{ID: 2, Priority: 2, Enabled: true, Match: Match{Called: "prefix:+44", Neighbourhood: &Neighbourhood{Digits: 4, CountryCode: "44"}}, Action: deny()},
		},
		Allow: []ListEntry{{ID: 7, Calling: "+19725550142"}},
	})
	for _, c := range []struct {
		name string
		call Call
		rule int64
	}{
		{"+1 caller, 10-digit called", Call{Calling: "+19725550199", Called: "9725550101"}, 1},
		{"1 and ten digits", Call{Calling: "19725550188", Called: "9725550101"}, 1},
		{"ten digits each", Call{Calling: "9725559999", Called: "9725550101"}, 1},
		{"called in +1", Call{Calling: "9725550177", Called: "+19725550101"}, 1},
		{"only the transformed caller", Call{TransformedCalling: "+19725550166", Called: "9725550101"}, 1},
		{"only the transformed called", Call{Calling: "9725550155", TransformedCalled: "+19725550101"}, 1},
		{"the called number itself", Call{Calling: "+19725550101", Called: "9725550101"}, 0},
		{"another exchange", Call{Calling: "9725560000", Called: "9725550101"}, 0},
		{"another area code", Call{Calling: "2145550199", Called: "9725550101"}, 0},
		{"another country", Call{Calling: "+449725550199", Called: "9725550101"}, 0},
		{"anonymous", Call{Calling: "anonymous", Called: "9725550101"}, 0},
		{"no caller", Call{Called: "9725550101"}, 0},
		{"an internal extension", Call{Calling: "5001", Called: "5002"}, 0},
		{"UK plan, trunk prefix 0", Call{Calling: "02079460999", Called: "+442079460000"}, 2},
	} {
		d, _ := e.Evaluate("p", &c.call, t0)
		if d.RuleID != c.rule {
			t.Errorf("%s (%+v): %s rule %d, want rule %d", c.name, c.call, d.Step, d.RuleID, c.rule)
		}
	}
	if d, _ := e.Evaluate("p", &Call{Calling: "+19725550142", Called: "9725550101"}, t0); d.Step != StepAllowList {
		t.Errorf("an allow-listed neighbour: %s", d.Step)
	}
	for _, n := range []Neighbourhood{{Digits: 16}, {CountryCode: "0"}, {CountryCode: "1234"}, {TrunkPrefix: "x"}} {
		var fe *FieldError
		r := Rule{Match: Match{Neighbourhood: &n}, Action: deny()}
		if err := ValidateRule(&r); !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a FieldError", n, err)
		}
	}
}
