package callpolicy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Engine evaluates calls against the current Snapshot. Swap publishes a new
// one atomically; calls in flight finish on the snapshot they started with.
// Rate-limit state lives in the Engine and survives swaps.
type Engine struct {
	cur       atomic.Pointer[Snapshot]
	lim       *limiter
	swapMu    sync.Mutex
	ruleHits  *prometheus.CounterVec
	buildTime prometheus.Histogram
}

// Hit is a rule's hit count since the last drain, and its latest hit.
type Hit struct {
	Count int64
	Last  time.Time
}

// NewEngine returns an Engine with no policies; reg may be nil.
func NewEngine(reg prometheus.Registerer) *Engine {
	e := &Engine{
		lim: newLimiter(),
		ruleHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_callpolicy_rule_hits_total",
			Help: "Calls decided by a rule (live evaluations only), per policy.",
		}, []string{"policy"}),
		buildTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "signalbox_callpolicy_snapshot_build_seconds",
			Help:    "Time to compile a call-policy snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
	}
	if reg != nil {
		reg.MustRegister(e.ruleHits, e.buildTime)
	}
	return e
}

// Swap publishes s. Per-rule hit counters not yet drained carry over to the
// rules of s with the same id (the counter objects are shared, so hits
// counted by calls still running on the old snapshot are not lost); counts
// of rules that no longer exist are dropped. Policies s shares with the
// live snapshot (see Snapshot.With) are left as they are. s must not
// be swapped into another Engine.
func (e *Engine) Swap(s *Snapshot) {
	e.swapMu.Lock()
	defer e.swapMu.Unlock()
	old := e.cur.Load()
	if s != nil {
		for id, p := range s.policies {
			var op *policy
			if old != nil {
				op = old.policies[id]
			}
			if op == p {
				// Shared with the live snapshot (Snapshot.With keeps
				// the policies it did not recompile): already wired, and
				// calls are reading it now.
				continue
			}
			p.hits = e.ruleHits.WithLabelValues(id)
			if op == nil || len(op.rules) == 0 {
				continue
			}
			prev := make(map[int64]*hitCounter, len(op.rules))
			for i := range op.rules {
				prev[op.rules[i].id] = op.rules[i].hit
			}
			for i := range p.rules {
				if h, ok := prev[p.rules[i].id]; ok {
					p.rules[i].hit = h
				}
			}
		}
		e.buildTime.Observe(s.buildTime.Seconds())
	}
	if old != nil {
		for id := range old.policies {
			if s == nil || s.policies[id] == nil {
				e.ruleHits.DeleteLabelValues(id)
			}
		}
	}
	e.cur.Store(s)
}

// Snapshot returns the current snapshot (nil before the first Swap).
func (e *Engine) Snapshot() *Snapshot { return e.cur.Load() }

// Evaluate decides a live call: it counts the call against rate limits and
// the deciding rule's hits. false: no such policy.
func (e *Engine) Evaluate(policyID string, call *Call, now time.Time) (Decision, bool) {
	return e.evaluate(policyID, call, now, true)
}

// DryRun decides like Evaluate but changes nothing: no rate-limit count,
// no hit count. A number currently blocked, or whose next call would
// exceed its limit, gets the rate-limit decision.
func (e *Engine) DryRun(policyID string, call *Call, now time.Time) (Decision, bool) {
	return e.evaluate(policyID, call, now, false)
}

// DrainHits returns and resets the per-rule hit counts accumulated since
// the last drain, by rule id, for the app to persist.
func (e *Engine) DrainHits() map[int64]Hit {
	out := make(map[int64]Hit)
	s := e.cur.Load()
	if s == nil {
		return out
	}
	for _, p := range s.policies {
		for i := range p.rules {
			r := &p.rules[i]
			n := r.hit.count.Swap(0)
			if n == 0 {
				continue
			}
			h := out[r.id]
			h.Count += n
			if last := time.Unix(0, r.hit.last.Load()); last.After(h.Last) {
				h.Last = last
			}
			out[r.id] = h
		}
	}
	return out
}

func (e *Engine) evaluate(policyID string, call *Call, now time.Time, live bool) (Decision, bool) {
	s := e.cur.Load()
	if s == nil || call == nil {
		return Decision{}, false
	}
	p, ok := s.policies[policyID]
	if !ok {
		return Decision{}, false
	}
	nowN := now.UnixNano()
	lists := [2]string{call.Calling, call.Called}

	// 1. Allow list: permit and stop. 2. Block list: deny and stop.
	if i := p.allow.match(lists[:], nowN); i >= 0 {
		en := &p.allow.entries[i]
		return Decision{Policy: p.id, Action: Action{Decision: Permit}, Step: StepAllowList, EntryID: en.id, Reason: en.reason}, true
	}
	if i := p.block.match(lists[:], nowN); i >= 0 {
		en := &p.block.entries[i]
		return Decision{Policy: p.id, Action: Action{Decision: Deny, Reason: "blocked"}, Step: StepBlockList, EntryID: en.id, Reason: en.reason}, true
	}

	// 3. Rate limits.
	if l := p.limit; l != nil {
		if l.overall != nil && e.lim.take(limKey{policy: p.id, overall: true}, l.overall, l.block, nowN, live) {
			return Decision{Policy: p.id, Action: l.action, Step: StepRateLimit, Reason: l.reasonOverall}, true
		}
		if l.perCalling != nil && e.lim.take(limKey{policy: p.id, calling: call.Calling}, l.perCalling, l.block, nowN, live) {
			return Decision{Policy: p.id, Action: l.action, Step: StepRateLimit, Reason: l.reasonCalling}, true
		}
	}

	// 4. Rules, first match in (priority, id) order.
	vals := [6]string{call.Calling, call.Called, call.TransformedCalling, call.TransformedCalled, call.TriggerPoint, call.DeviceName}
	if i := p.matcher.Match(vals[:], func(i int) bool { return p.rules[i].active(nowN, now) }); i >= 0 {
		r := &p.rules[i]
		if live {
			r.hit.count.Add(1)
			r.hit.last.Store(nowN)
			if p.hits != nil {
				p.hits.Inc()
			}
		}
		return Decision{Policy: p.id, Action: *r.action, Step: StepRule, RuleID: r.id, Reason: r.reason}, true
	}

	// 5. Policy default.
	return Decision{Policy: p.id, Action: p.def, Step: StepDefault, Reason: "no rule matched: policy default"}, true
}

func (l *entryList) match(vals []string, now int64) int {
	if l.matcher == nil {
		return -1
	}
	return l.matcher.Match(vals, func(i int) bool {
		x := l.entries[i].expires
		return x == 0 || x > now
	})
}
