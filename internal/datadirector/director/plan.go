package director

import (
	"encoding/json"
	"fmt"
)

// Plan is a feed as this node is to run it: the spec as the API took it
// and the store keeps it (internal/datadirector/site may have added the peer's mirrored
// topics to its sources), and where this node stands with it. ApplyPlans
// takes plans; Apply takes specs run as they are.
type Plan struct {
	Spec FeedSpec
	// Standby: another site runs the feed. This node keeps it stopped,
	// with its consumer groups (internal/datadirector/site keeps them where that site
	// delivered), and its status says standby.
	Standby bool
	// FromCreation: this site runs the feed for another (a takeover).
	// Where its consumer group has no position on a partition, it starts
	// at the first copy since the feed's creation, not at the end, which
	// would skip what came since the owner stopped (a partition idle until
	// then, say).
	FromCreation bool
}

// Plans are specs run as they are: no other site, no takeover.
func Plans(specs []FeedSpec) []Plan {
	out := make([]Plan, len(specs))
	for i, s := range specs {
		out[i] = Plan{Spec: s}
	}
	return out
}

// stage is the part a running feed plays in its plan.
type stage uint8

const (
	// stageWhole: the feed as its spec says.
	stageWhole stage = iota
	// stageRekey: a re-keyed xdr feed's first stage, a kafka feed of the
	// NF topics into the re-key topic keyed by correlation id; it tells
	// the second stage how far it has forwarded (watermark.go).
	stageRekey
	// stageCorrelate: that feed's second stage, correlating the re-key
	// topic under the feed's own name.
	stageCorrelate
)

// runPlan is what one running feed runs, made from a Plan by expand (a
// re-keyed xdr feed's plan makes two). Only the embedded spec is JSON; the
// rest is this node's, never the API's.
type runPlan struct {
	FeedSpec
	stage stage
	// upstream is, for stageCorrelate, the first stage's sources (the NF
	// topics), which its watermarks and record storing are about.
	upstream     []string
	standby      bool
	fromCreation bool
}

// key is what makes a running feed the one a plan asks for: its spec, its
// stage and whether it stands by (a standby feed then disabled here must
// show "stopped" though its spec's JSON is the same). fromCreation only
// places a feed as it starts: no cause to restart it.
func (p *runPlan) key() string {
	b, _ := json.Marshal(&p.FeedSpec)
	return fmt.Sprintf("%s stage=%d standby=%t", b, p.stage, p.standby)
}

// sources is what an xdr feed correlates: its re-key stage's sources for a
// correlating stage, else its own.
func (p *runPlan) sources() []string {
	if p.stage == stageCorrelate {
		return p.upstream
	}
	return p.Sources
}

// running reports whether the plan runs (not disabled, not standing by).
func (p *runPlan) running() bool { return p.Enabled == nil || *p.Enabled }
