package callpolicy

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// reputation is a policy's compiled Reputation.
type reputation struct {
	spec    *Reputation
	budget  time.Duration
	closed  bool
	failure Action
	actions []repAction
}

type repAction struct {
	min    float64
	hasMin bool
	label  string
	action Action
	reason string
}

func compileReputation(r *Reputation) *reputation {
	c := &reputation{spec: r, budget: time.Duration(r.BudgetMs) * time.Millisecond, closed: r.Failure == "closed",
		failure: Action{Decision: Deny, Reason: "unavailable"}}
	if c.budget <= 0 {
		c.budget = DefaultReputationBudgetMs * time.Millisecond
	}
	if r.FailureAction != nil {
		c.failure = *r.FailureAction
	}
	for _, a := range r.Actions {
		ra := repAction{label: a.Label, action: a.Action}
		var why []string
		if a.MinScore != nil {
			ra.min, ra.hasMin = *a.MinScore, true
			why = append(why, "score >= "+strconv.FormatFloat(ra.min, 'g', -1, 64))
		}
		if a.Label != "" {
			why = append(why, "label "+strconv.Quote(a.Label))
		}
		ra.reason = "reputation: " + strings.Join(why, " and ")
		c.actions = append(c.actions, ra)
	}
	return c
}

// decide turns a lookup's result into a decision, if the policy's
// reputation settings decide the call; for dry runs (!live) note describes
// the result and the decision explains itself in full.
func (r *reputation) decide(policy string, res ReputationResult, live bool) (d Decision, decided bool, note string) {
	if live {
		// A live call's explanation is not kept: build no strings.
		switch a := r.match(res); {
		case !res.Found && r.closed:
			return Decision{Policy: policy, Action: r.failure, Step: StepReputation, Reason: "reputation service gave no answer: failing closed"}, true, ""
		case res.Found && a != nil:
			return Decision{Policy: policy, Action: a.action, Step: StepReputation, Reason: a.reason}, true, ""
		}
		return Decision{}, false, ""
	}
	if !res.Found {
		if r.closed {
			return Decision{Policy: policy, Action: r.failure, Step: StepReputation,
				Reason: "reputation service gave no answer (" + res.Err + "): failing closed"}, true, "no answer: " + res.Err + "; failing closed"
		}
		return Decision{}, false, "no answer: " + res.Err + "; failing open (the rules decide)"
	}
	from := "from the service"
	if res.Cached {
		from = "from the cache"
	}
	note = "score " + strconv.FormatFloat(res.Score, 'g', -1, 64)
	if len(res.Labels) > 0 {
		note += ", labels " + strings.Join(res.Labels, ",")
	}
	note += " (" + from + ")"
	if a := r.match(res); a != nil {
		return Decision{Policy: policy, Action: a.action, Step: StepReputation, Reason: a.reason + ": " + note}, true, note
	}
	return Decision{}, false, note + "; no reputation action applies"
}

// match returns the first action a found answer meets, or nil.
func (r *reputation) match(res ReputationResult) *repAction {
	if !res.Found {
		return nil
	}
	for i := range r.actions {
		a := &r.actions[i]
		if a.hasMin && res.Score < a.min {
			continue
		}
		if a.label != "" && !slices.Contains(res.Labels, a.label) {
			continue
		}
		return a
	}
	return nil
}
