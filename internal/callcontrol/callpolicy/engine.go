package callpolicy

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

// Engine evaluates calls against the current Snapshot. Swap publishes a new
// one atomically; calls in flight finish on the snapshot they started with.
// Rate-limit state lives in the Engine and survives swaps.
type Engine struct {
	cur       atomic.Pointer[Snapshot]
	reputer   atomic.Pointer[reputerBox]
	lim       *limiter
	swapMu    sync.Mutex
	ruleHits  *prometheus.CounterVec
	limited   *prometheus.CounterVec
	lookups   *prometheus.CounterVec
	buildTime prometheus.Histogram
}

type reputerBox struct{ r Reputer }

// SetReputer sets what looks numbers up for the policies with a
// Reputation; without one such policies skip that step, as failing open.
func (e *Engine) SetReputer(r Reputer) { e.reputer.Store(&reputerBox{r}) }

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
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_callpolicy_rate_limited_total",
			Help: "Calls decided by a rate limit (live evaluations only), per policy: TDoS and toll-fraud trips.",
		}, []string{"policy"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_callpolicy_directory_lookups_total",
			Help: "Caller names looked up in a directory (live calls), by result: exact, prefix, fallback (the directory's fallback name) or miss (name left as is).",
		}, []string{"directory", "result"}),
		buildTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "signalbox_callpolicy_snapshot_build_seconds",
			Help:    "Time to compile a call-policy snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
	}
	if reg != nil {
		reg.MustRegister(e.ruleHits, e.limited, e.lookups, e.buildTime)
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
			p.limited = e.limited.WithLabelValues(id)
			if op == nil {
				continue
			}
			carryHits(op, p)
		}
		for id, r := range s.lib.dirs {
			for i := range r.counts {
				r.counts[i] = e.lookups.WithLabelValues(id, lookupResultNames[i])
			}
		}
		e.buildTime.Observe(s.buildTime.Seconds())
	}
	if old != nil {
		for id := range old.policies {
			if s == nil || s.policies[id] == nil {
				e.ruleHits.DeleteLabelValues(id)
				e.limited.DeleteLabelValues(id)
			}
		}
		for id := range old.lib.dirs {
			if s == nil || s.lib.dirs[id] == nil {
				e.lookups.DeletePartialMatch(prometheus.Labels{"directory": id})
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

// Has reports whether the live snapshot holds policyID.
func (e *Engine) Has(policyID string) bool {
	s := e.cur.Load()
	return s != nil && s.policies[policyID] != nil
}

// DryRun decides like Evaluate but changes nothing: no rate-limit count,
// no hit count. A number currently blocked, or whose next call would
// exceed its limit, gets the rate-limit decision.
func (e *Engine) DryRun(policyID string, call *Call, now time.Time) (Decision, bool) {
	return e.evaluate(policyID, call, now, false)
}

// carryHits gives the rules of p the hit counters of the rules of op with
// the same id. A base layer p shares with op (WithRuleChanges, WithLists,
// WithSharedList) holds them already: then only a second layer compiled
// anew takes over its predecessor's.
func carryHits(op, p *policy) {
	from, to := []*layer{&op.layer, op.delta}, []*layer{&p.layer, p.delta}
	if len(op.rules) == len(p.rules) && (len(p.rules) == 0 || &op.rules[0] == &p.rules[0]) {
		if p.delta == op.delta {
			return
		}
		from, to = from[1:], to[1:]
	}
	prev := map[int64]*hitCounter{}
	for _, l := range from {
		if l != nil {
			for i := range l.rules {
				prev[l.rules[i].id] = l.rules[i].hit
			}
		}
	}
	for _, l := range to {
		if l == nil {
			continue
		}
		for i := range l.rules {
			if h, ok := prev[l.rules[i].id]; ok {
				l.rules[i].hit = h
			}
		}
	}
}

// TrackLimits turns on (or off) noting the rate-limit keys live calls
// change, for a cluster syncer to read with LimitsChanged.
func (e *Engine) TrackLimits(on bool) { e.lim.track.Store(on) }

// LimitsChanged returns this node's current counts of the rate-limit keys
// live calls changed since the last call (TrackLimits must be on).
func (e *Engine) LimitsChanged(now time.Time) []LimitCount { return e.lim.changed(now.UnixNano()) }

// ApplyRemoteLimits records the sum of the other nodes' counts (and their
// blocks) per key and window; later calls count them with this node's own.
func (e *Engine) ApplyRemoteLimits(cs []LimitCount, now time.Time) {
	e.lim.applyRemote(cs, now.UnixNano())
}

// ForgetRemoteLimits drops the other nodes' counts: the limits are this
// node's own again (the cluster sync failing open).
func (e *Engine) ForgetRemoteLimits() { e.lim.forgetRemote() }

// DrainHits returns and resets the per-rule hit counts accumulated since
// the last drain, by rule id, for the app to persist.
func (e *Engine) DrainHits() map[int64]Hit {
	out := make(map[int64]Hit)
	s := e.cur.Load()
	if s == nil {
		return out
	}
	for _, p := range s.policies {
		p.eachRule(func(r *rule) {
			n := r.hit.count.Swap(0)
			if n == 0 {
				return
			}
			h := out[r.id]
			h.Count += n
			if last := time.Unix(0, r.hit.last.Load()); last.After(h.Last) {
				h.Last = last
			}
			out[r.id] = h
		})
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
	d := e.decide(p, call, now, live)
	if m := d.Action.Modify; m != nil && strings.HasPrefix(m.CallingName, directory.RefPrefix) {
		s.nameCaller(&d, call, live)
	}
	return d, true
}

// Lookup results a directory counts.
const (
	lookupExact = iota
	lookupPrefix
	lookupFallback
	lookupMiss
	numLookupResults
)

var lookupResultNames = [numLookupResults]string{"exact", "prefix", "fallback", "miss"}

// nameCaller replaces a calling_name of "directory:<id>" in d with the
// caller's name from that directory, its fallback, or nothing (the name
// CUCM has stays). The decision's action is copied, never the shared one
// changed. A dry run says how the name was found.
func (s *Snapshot) nameCaller(d *Decision, call *Call, live bool) {
	m := *d.Action.Modify
	id := m.CallingName[len(directory.RefPrefix):]
	ref := s.lib.dirs[id]
	var h directory.Hit
	res := lookupMiss
	if ref != nil {
		var ok bool
		if h, ok = ref.t.LookupCall(call.Calling, call.TransformedCalling); ok {
			res = lookupExact
			if h.Prefix {
				res = lookupPrefix
			}
		} else if fb := ref.t.Fallback(); fb != "" {
			h.Name, res = fb, lookupFallback
		}
		if c := ref.counts[res]; c != nil && live {
			c.Inc()
		}
	}
	m.CallingName = h.Name
	if m == (Modify{}) {
		d.Action.Modify = nil
	} else {
		d.Action.Modify = &m
	}
	if live {
		return
	}
	switch {
	case ref == nil:
		d.Name = fmt.Sprintf("directory %s does not exist: name left as is", id)
	case res == lookupExact:
		d.Name = fmt.Sprintf("name %q from directory %s, number %s (%s)", h.Name, id, h.Number, h.Form)
	case res == lookupPrefix:
		d.Name = fmt.Sprintf("name %q from directory %s, prefix %s (%s)", h.Name, id, h.Number, h.Form)
	case res == lookupFallback:
		d.Name = fmt.Sprintf("calling number not in directory %s: fallback name %q", id, h.Name)
	default:
		d.Name = fmt.Sprintf("calling number not in directory %s: name left as is", id)
	}
}

func (e *Engine) decide(p *policy, call *Call, now time.Time, live bool) Decision {
	nowN := now.UnixNano()

	// 1. Allow lists (the policy's, then shared ones): permit and stop.
	// 2. Block lists likewise: deny and stop. An entry's action, else its
	// shared list's, else the policy's list action.
	if d, ok := p.listHit(&p.allow, p.sharedAllow, p.allowAction, StepAllowList, call, nowN); ok {
		return d
	}
	if d, ok := p.listHit(&p.block, p.sharedBlock, p.blockAction, StepBlockList, call, nowN); ok {
		return d
	}

	// 3. Rate limits.
	if l := p.limit; l != nil {
		if ls := l.overall; ls != nil && e.lim.take(limKey{policy: p.id, kind: limOverall}, ls.lim, ls.block, nowN, live) {
			p.countLimited(live)
			return Decision{Policy: p.id, Action: ls.action, Step: StepRateLimit, Reason: ls.reason}
		}
		if ls := l.perCalled; ls != nil {
			key, form := call.TransformedCalled, "transformed_called"
			if key == "" {
				key, form = call.Called, "called"
			}
			if e.lim.take(limKey{policy: p.id, number: key, kind: limCalled}, ls.lim, ls.block, nowN, live) {
				p.countLimited(live)
				return Decision{Policy: p.id, Action: ls.action, Step: StepRateLimit, Form: form, Reason: ls.reason}
			}
		}
		if ls := l.perCalling; ls != nil {
			key, form := call.TransformedCalling, formNames[1][0]
			if key == "" {
				key, form = call.Calling, formNames[0][0]
			}
			if e.lim.take(limKey{policy: p.id, number: key}, ls.lim, ls.block, nowN, live) {
				p.countLimited(live)
				return Decision{Policy: p.id, Action: ls.action, Step: StepRateLimit, Form: form, Reason: ls.reason}
			}
		}
	}

	// 4. The reputation service, for a caller who presents a number.
	var repNote string
	if rp := p.rep; rp != nil {
		number := call.TransformedCalling
		if number == "" {
			number = call.Calling
		}
		rb := e.reputer.Load()
		switch {
		case number == "":
			repNote = "anonymous caller: not looked up"
		case rb == nil:
			repNote = "no reputation service on this node: not looked up"
		default:
			res := rb.r.Lookup(p.id, rp.spec, number, rp.budget, live)
			d, ok, note := rp.decide(p.id, res, live)
			if ok {
				if !live {
					d.Reputation = note
				}
				return d
			}
			repNote = note
		}
	}

	// 5. Rules, first match in (priority, id) order.
	vals := [6]string{call.Calling, call.Called, call.TransformedCalling, call.TransformedCalled, call.TriggerPoint, call.DeviceName}
	var r *rule
	if p.delta == nil {
		if i := p.layer.match(vals[:], nowN, now, nil); i >= 0 {
			r = &p.rules[i]
		}
	} else {
		if i := p.layer.match(vals[:], nowN, now, p.deleted); i >= 0 {
			r = &p.rules[i]
		}
		// The first match is the lowest (priority, id) of both layers.
		if j := p.delta.match(vals[:], nowN, now, nil); j >= 0 {
			if d := &p.delta.rules[j]; r == nil || d.prio < r.prio || d.prio == r.prio && d.id < r.id {
				r = d
			}
		}
	}
	if r != nil {
		if live {
			r.hit.count.Add(1)
			r.hit.last.Store(nowN)
			if p.hits != nil {
				p.hits.Inc()
			}
		}
		d := Decision{Policy: p.id, Action: *r.action, Step: StepRule, RuleID: r.id, Reason: r.reason}
		if !live {
			d.Reputation = repNote
		}
		return d
	}

	// 6. Policy default.
	d := Decision{Policy: p.id, Action: p.def, Step: StepDefault, Reason: "no rule matched: policy default"}
	if !live {
		d.Reputation = repNote
	}
	return d
}

// match returns the index of the first active rule of the layer matching
// vals, skipping the rules set in deleted, or -1.
func (l *layer) match(vals []string, nowN int64, now time.Time, deleted []uint64) int {
	if l.matcher == nil {
		return -1
	}
	// The numbers copied out of vals: a closure holding vals would move
	// the caller's array to the heap, an allocation per call.
	n := callNumbers{vals[0], vals[1], vals[2], vals[3]}
	if l.ruleOf == nil {
		if deleted == nil {
			return l.matcher.Match(vals, func(i int) bool { return l.rules[i].admits(nowN, now, n) })
		}
		return l.matcher.Match(vals, func(i int) bool { return deleted[i>>6]&(1<<(i&63)) == 0 && l.rules[i].admits(nowN, now, n) })
	}
	i := l.matcher.Match(vals, func(i int) bool {
		k := l.ruleOf[i]
		return (deleted == nil || deleted[k>>6]&(1<<(k&63)) == 0) && l.rules[k].admits(nowN, now, n)
	})
	if i >= 0 {
		i = int(l.ruleOf[i])
	}
	return i
}

// eachRule calls fn for every compiled rule of the policy that is live
// (base rules not deleted, and the delta's).
func (p *policy) eachRule(fn func(r *rule)) {
	for i := range p.rules {
		if p.deleted == nil || p.deleted[i>>6]&(1<<(i&63)) == 0 {
			fn(&p.rules[i])
		}
	}
	if p.delta != nil {
		for i := range p.delta.rules {
			fn(&p.delta.rules[i])
		}
	}
}

// countLimited counts a live call a rate limit decided.
func (p *policy) countLimited(live bool) {
	if live && p.limited != nil {
		p.limited.Inc()
	}
}

// listHit checks the policy's own list, then the shared lists of a kind.
func (p *policy) listHit(own *entryList, shared []*CompiledList, def *Action, step Step, call *Call, now int64) (Decision, bool) {
	l, i, form := own, -1, ""
	if i, form = own.matchCall(call, now); i < 0 {
		for _, c := range shared {
			if i, form = c.entries.matchCall(call, now); i >= 0 {
				l = &c.entries
				break
			}
		}
	}
	if i < 0 {
		return Decision{}, false
	}
	en := &l.entries[i]
	a := en.action
	if a == nil {
		a = def
	}
	return Decision{Policy: p.id, Action: *a, Step: step, EntryID: en.id, Form: form, Reason: en.reason}, true
}

// formNames[i][j] names calling form i (0 plain, 1 transformed) and called
// form j (0 plain, 1 transformed, 2 not matched on), as Decision.Form says.
var formNames = [2][3]string{
	{"calling", "calling+called", "calling+transformed_called"},
	{"transformed_calling", "transformed_calling+called", "transformed_calling+transformed_called"},
}

// numberForms returns the distinct forms a number was presented in, and
// which they are (0 as at the trigger point, 1 transformed): one empty form
// when neither was presented.
func numberForms(plain, transformed string) (vals [2]string, which [2]uint8, n int) {
	switch {
	case plain == "" && transformed != "":
		return [2]string{transformed}, [2]uint8{1}, 1
	case transformed == "" || transformed == plain:
		return [2]string{plain}, [2]uint8{0}, 1
	}
	return [2]string{plain, transformed}, [2]uint8{0, 1}, 2
}

// matchCall returns the index of the lowest-id unexpired entry matching the
// call in any form of its numbers, and the form it matched (Decision.Form),
// or -1.
func (l *entryList) matchCall(call *Call, now int64) (int, string) {
	if l.matcher == nil {
		return -1, ""
	}
	accept := func(i int) bool {
		x := l.entries[i].expires
		return x == 0 || x > now
	}
	cg, cgWhich, cgN := numberForms(call.Calling, call.TransformedCalling)
	cd, cdWhich, cdN := numberForms(call.Called, call.TransformedCalled)
	if !l.anyCalled {
		cdN = 1 // no entry names a called number: one pass per calling form
	}
	best, form := -1, ""
	var vals [2]string
	for i := range cgN {
		for j := range cdN {
			vals[0], vals[1] = cg[i], cd[j]
			k := l.matcher.Match(vals[:], accept)
			if k < 0 || best >= 0 && k >= best {
				continue
			}
			best = k
			if l.entries[k].hasCalled {
				form = formNames[cgWhich[i]][1+cdWhich[j]]
			} else {
				form = formNames[cgWhich[i]][0]
			}
		}
	}
	return best, form
}
