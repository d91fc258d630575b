//go:build !race

// The race detector makes sync.Pool drop items on purpose, so allocation
// counts are only meaningful without it.

package callpolicy

import (
	"testing"
)

func TestEvaluateNoAlloc(t *testing.T) {
	e := mustEngine(t, PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()},
		Rules: []Rule{
			{ID: 1, Priority: 1, Enabled: true, Match: Match{Called: "prefix:1900"}, Action: deny()},
			{ID: 2, Priority: 2, Enabled: true, Match: Match{TriggerPoint: "Originating"}, Action: deny(), Schedule: &Schedule{TimeZone: "Europe/Paris", From: "08:00", To: "18:00"}},
		},
		Block: []ListEntry{{ID: 1, Calling: "prefix:+1666"}}})
	c := &Call{Calling: "+1555", Called: "19005551234", TriggerPoint: "ORIGINATING"}
	if n := testing.AllocsPerRun(200, func() { e.Evaluate("p", c, t0) }); n != 0 {
		t.Errorf("Evaluate allocates %v times", n)
	}
}
