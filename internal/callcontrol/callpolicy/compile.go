package callpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	_ "time/tzdata" // schedules name IANA zones; do not depend on the host's zoneinfo

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/callcontrol/match"
)

// Snapshot is an immutable compiled set of policies. Build one with Compile
// and publish it with Engine.Swap; a Snapshot belongs to one Engine.
type Snapshot struct {
	policies  map[string]*policy
	lib       *Library // directories, shared lists and groups; never nil
	buildTime time.Duration
}

// dirRef is a compiled directory and its lookup counters (set by
// Engine.Swap).
type dirRef struct {
	t      *directory.Table
	counts [numLookupResults]prometheus.Counter
}

// Directory returns the compiled directory id, or nil.
func (s *Snapshot) Directory(id string) *directory.Table {
	if r := s.lib.dirs[id]; r != nil {
		return r.t
	}
	return nil
}

// WithDirectory returns a snapshot of s's policies with directory t in
// place of the one of its id (or added): policies read directories only
// when a call is evaluated, so none is compiled again.
func (s *Snapshot) WithDirectory(t *directory.Table) *Snapshot {
	lib := *s.lib
	lib.dirs = maps.Clone(s.lib.dirs)
	lib.dirs[t.ID()] = &dirRef{t: t}
	return &Snapshot{policies: s.policies, lib: &lib, buildTime: s.buildTime}
}

// Library returns what the snapshot's policies share.
func (s *Snapshot) Library() *Library { return s.lib }

// emptyLibrary is the library of a snapshot compiled without one.
func emptyLibrary() *Library {
	return &Library{dirs: map[string]*dirRef{}, groups: map[string]*groupValues{}}
}

// Policies returns the ids of the compiled policies, sorted.
func (s *Snapshot) Policies() []string {
	ids := make([]string, 0, len(s.policies))
	for id := range s.policies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// BuildTime is how long Compile took.
func (s *Snapshot) BuildTime() time.Duration { return s.buildTime }

type policy struct {
	id    string
	def   Action
	layer // the rules, or the base rules when delta is set
	// An incremental replacement (Snapshot.WithRuleChanges) adds delta
	// (the rules added since the base was compiled) and marks the base's
	// rules removed since in deleted, instead of compiling everything.
	delta    *layer
	deleted  []uint64 // bit per base rule index
	deltaSrc []Rule   // the delta's rules as configured, to compile it again
	// index holds the source hash (Rule.SrcHash) and id of every rule
	// of the policy that has one, disabled ones included, sorted: what an
	// incremental replacement compares a new rule set against.
	index       []HashID
	allow       entryList
	block       entryList
	allowAction *Action // a list hit's action when its entry has none
	blockAction *Action
	sharedAllow []*CompiledList // shared lists that apply, checked after the policy's own
	sharedBlock []*CompiledList
	limit       *rateLimit
	rep         *reputation
	hits        prometheus.Counter // set by Engine.Swap; nil before
	limited     prometheus.Counter // likewise: calls a rate limit decided
}

// layer is a set of compiled rules and their matcher.
type layer struct {
	rules   []rule // rank order: priority, then id
	matcher *match.Matcher
	// ruleOf maps a matcher row to its rule when a rule naming groups
	// was expanded to several rows; nil: row i is rule i.
	ruleOf []int32
}

type rule struct {
	id      int64
	prio    int
	action  *Action // shared by the rules of a policy with the same action
	sched   *schedule
	neigh   *neighbourhood // nil: no neighbourhood condition
	expires int64          // unix nanos; 0 = never
	reason  string
	hit     *hitCounter
}

type hitCounter struct {
	count atomic.Int64
	last  atomic.Int64 // unix nanos
}

type entry struct {
	id        int64
	expires   int64
	reason    string
	hasCalled bool
	action    *Action // the entry's own, or its shared list's; nil: the policy's list action
}

type entryList struct {
	entries   []entry
	matcher   *match.Matcher // nil when the list is empty
	anyCalled bool           // some entry has a called number
}

type rateLimit struct {
	perCalling, perCalled, overall *limitSpec
}

// limitSpec is one compiled limit with what applies when it is exceeded.
type limitSpec struct {
	lim    *Limit
	block  time.Duration // 0: the limit's window
	action Action
	reason string
}

func compileLimit(rl *RateLimit, l *Limit, reason string) *limitSpec {
	if l == nil {
		return nil
	}
	ls := &limitSpec{lim: l, block: time.Duration(rl.BlockSeconds) * time.Second, action: Action{Decision: Deny, Reason: "blocked"}, reason: reason}
	if l.BlockSeconds > 0 {
		ls.block = time.Duration(l.BlockSeconds) * time.Second
	}
	switch {
	case l.Action != nil:
		ls.action = *l.Action
	case rl.Action != nil:
		ls.action = *rl.Action
	}
	return ls
}

func (r *rule) active(now int64, t time.Time) bool {
	if r.expires != 0 && r.expires <= now {
		return false
	}
	return r.sched == nil || r.sched.active(t)
}

// admits reports whether the rule, one the matcher found for the call of
// numbers n, is active and its conditions beyond the fields' own hold.
func (r *rule) admits(now int64, t time.Time, n callNumbers) bool {
	return r.active(now, t) && (r.neigh == nil || r.neigh.matches(n.calling, n.called, n.tCalling, n.tCalled))
}

// callNumbers are a call's numbers, as the rules' conditions beyond their
// fields read them.
type callNumbers struct{ calling, called, tCalling, tCalled string }

// Compile validates and compiles every policy, with no directories,
// shared lists or groups.
func Compile(cfgs []PolicyConfig) (*Snapshot, error) { return CompileWith(cfgs, nil) }

// CompileWith validates and compiles every policy against lib (nil: an
// empty one): the caller-name directories a calling_name of
// "directory:<id>" reads, the shared lists that apply, the groups rules
// name. Disabled rules are left out; expired rules and schedules are
// checked at evaluation time, since time moves on while a snapshot is
// live. The error names the policy, the rule or entry, and the field, and
// a directory or group named but not there.
func CompileWith(cfgs []PolicyConfig, lib *Library) (*Snapshot, error) {
	start := time.Now()
	if lib == nil {
		lib = emptyLibrary()
	}
	s := &Snapshot{policies: make(map[string]*policy, len(cfgs)), lib: lib}
	zones := map[string]*time.Location{}
	for i := range cfgs {
		cfg := &cfgs[i]
		if _, dup := s.policies[cfg.Policy.ID]; dup {
			return nil, fmt.Errorf("policy %q: defined twice", cfg.Policy.ID)
		}
		p, err := validateAndCompile(cfg, zones, lib)
		if err != nil {
			return nil, err
		}
		if err := s.checkDirs(cfg); err != nil {
			return nil, fmt.Errorf("policy %q: %w", cfg.Policy.ID, err)
		}
		s.policies[p.id] = p
	}
	s.buildTime = time.Since(start)
	return s, nil
}

// CompiledPolicy is one policy compiled on its own, to be put into a
// snapshot with Snapshot.With.
type CompiledPolicy struct {
	p         *policy
	buildTime time.Duration
}

// CompilePolicy validates and compiles one policy, like Compile, against
// lib (nil: an empty one), which must be the library of the snapshot the
// result goes into (Snapshot.With).
func CompilePolicy(cfg *PolicyConfig, lib *Library) (*CompiledPolicy, error) {
	start := time.Now()
	if lib == nil {
		lib = emptyLibrary()
	}
	p, err := validateAndCompile(cfg, map[string]*time.Location{}, lib)
	if err != nil {
		return nil, err
	}
	return &CompiledPolicy{p: p, buildTime: time.Since(start)}, nil
}

// With returns a snapshot in which cp replaces (or adds) its policy and
// every other policy is s's, shared: replacing one policy's rules does not
// reload or recompile the rest. s is unchanged; cp goes into one snapshot
// only.
func (s *Snapshot) With(cp *CompiledPolicy) *Snapshot {
	n := &Snapshot{policies: maps.Clone(s.policies), lib: s.lib, buildTime: cp.buildTime}
	if n.policies == nil {
		n.policies = map[string]*policy{}
	}
	n.policies[cp.p.id] = cp.p
	return n
}

// checkDirs reports a directory cfg names that s lacks.
func (s *Snapshot) checkDirs(cfg *PolicyConfig) error {
	for _, ref := range DirectoryRefs(cfg) {
		if s.lib.dirs[ref.ID] == nil {
			err := fieldErr(ref.Field, "directory %q does not exist", ref.ID)
			switch {
			case ref.Rule >= 0:
				return fmt.Errorf("rule %d: %w", cfg.Rules[ref.Rule].ID, err)
			case ref.Entry >= 0 && ref.List == AllowList:
				return fmt.Errorf("allow list entry %d: %w", cfg.Allow[ref.Entry].ID, err)
			case ref.Entry >= 0:
				return fmt.Errorf("block list entry %d: %w", cfg.Block[ref.Entry].ID, err)
			}
			return err
		}
	}
	return nil
}

// DirRef is a directory named by an action of a policy, a rule or a list
// entry, and the field that names it.
type DirRef struct {
	ID    string
	Rule  int      // index in PolicyConfig.Rules; -1: not a rule
	Entry int      // index in PolicyConfig.Allow or Block (List); -1: not an entry
	List  ListKind // the entry's list
	Field string   // in the rule, entry or policy: "action.modify.calling_name"
}

// DirectoryRefs lists the directories cfg reads.
func DirectoryRefs(cfg *PolicyConfig) []DirRef {
	var out []DirRef
	add := func(ref DirRef, field string, a *Action) {
		if a == nil || a.Modify == nil {
			return
		}
		if id := directory.RefID(a.Modify.CallingName); id != "" {
			ref.ID, ref.Field = id, field+"modify.calling_name"
			out = append(out, ref)
		}
	}
	pol := DirRef{Rule: -1, Entry: -1}
	add(pol, "default_action.", &cfg.Policy.DefaultAction)
	add(pol, "allow_action.", cfg.Policy.AllowAction)
	add(pol, "block_action.", cfg.Policy.BlockAction)
	if rl := cfg.Policy.RateLimit; rl != nil {
		add(pol, "rate_limit.action.", rl.Action)
		for _, nl := range []struct {
			name string
			l    *Limit
		}{{"per_calling", rl.PerCalling}, {"per_called", rl.PerCalled}, {"overall", rl.Overall}} {
			if nl.l != nil {
				add(pol, "rate_limit."+nl.name+".action.", nl.l.Action)
			}
		}
	}
	for i := range cfg.Rules {
		add(DirRef{Rule: i, Entry: -1}, "action.", &cfg.Rules[i].Action)
	}
	for _, l := range []struct {
		kind    ListKind
		entries []ListEntry
	}{{AllowList, cfg.Allow}, {BlockList, cfg.Block}} {
		for i := range l.entries {
			add(DirRef{Rule: -1, Entry: i, List: l.kind}, "action.", l.entries[i].Action)
		}
	}
	return out
}

// validateAndCompile checks and compiles one policy, naming it in errors.
func validateAndCompile(cfg *PolicyConfig, zones map[string]*time.Location, lib *Library) (*policy, error) {
	if err := ValidatePolicy(&cfg.Policy); err != nil {
		return nil, fmt.Errorf("policy %q: %w", cfg.Policy.ID, err)
	}
	p, err := compilePolicy(cfg, zones, lib)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", cfg.Policy.ID, err)
	}
	return p, nil
}

func compilePolicy(cfg *PolicyConfig, zones map[string]*time.Location, lib *Library) (*policy, error) {
	p := &policy{id: cfg.Policy.ID, def: cfg.Policy.DefaultAction,
		allowAction: &Action{Decision: Permit}, blockAction: &Action{Decision: Deny, Reason: "blocked"},
		sharedAllow: lib.sharedFor(cfg.Policy.ID, AllowList), sharedBlock: lib.sharedFor(cfg.Policy.ID, BlockList)}
	if a := cfg.Policy.AllowAction; a != nil {
		p.allowAction = a
	}
	if a := cfg.Policy.BlockAction; a != nil {
		p.blockAction = a
	}
	if rl := cfg.Policy.RateLimit; rl != nil {
		p.limit = &rateLimit{}
		if l := rl.PerCalling; l != nil {
			p.limit.perCalling = compileLimit(rl, l, fmt.Sprintf("rate limit: more than %d calls in %ds from this calling number", l.Calls, l.WindowSeconds))
		}
		if l := rl.PerCalled; l != nil {
			p.limit.perCalled = compileLimit(rl, l, fmt.Sprintf("rate limit: more than %d calls in %ds to this called number", l.Calls, l.WindowSeconds))
		}
		if l := rl.Overall; l != nil {
			p.limit.overall = compileLimit(rl, l, fmt.Sprintf("rate limit: more than %d calls in %ds to policy %s", l.Calls, l.WindowSeconds, p.id))
		}
	}

	if r := cfg.Policy.Reputation; r != nil {
		p.rep = compileReputation(r)
	}

	idx := make([]int, 0, len(cfg.Rules))
	seen := make(map[int64]bool, len(cfg.Rules))
	for i := range cfg.Rules {
		if i%64 == 63 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
		r := &cfg.Rules[i]
		if seen[r.ID] {
			return nil, fmt.Errorf("rule %d: id used twice", r.ID)
		}
		seen[r.ID] = true
		if err := ValidateRule(r); err != nil {
			return nil, fmt.Errorf("rule %d: %w", r.ID, err)
		}
		if r.Enabled {
			idx = append(idx, i)
		}
	}
	for i := range cfg.Rules {
		if h := cfg.Rules[i].SrcHash; h != 0 {
			p.index = append(p.index, HashID{Hash: h, ID: cfg.Rules[i].ID})
		}
	}
	slices.SortFunc(p.index, cmpHashID)
	var err error
	var actions actionSet
	if p.layer, err = compileLayer(cfg.Rules, idx, zones, lib, &actions); err != nil {
		return nil, err
	}
	if p.allow, err = compileList(AllowList, cfg.Allow, nil, &actions); err != nil {
		return nil, err
	}
	if p.block, err = compileList(BlockList, cfg.Block, nil, &actions); err != nil {
		return nil, err
	}
	return p, nil
}

// compileLayer compiles the rules cfg[i] for i in idx (enabled, valid)
// into a layer in rank order.
func compileLayer(cfg []Rule, idx []int, zones map[string]*time.Location, lib *Library, actions *actionSet) (layer, error) {
	var p layer
	slices.SortFunc(idx, func(a, b int) int {
		ra, rb := &cfg[a], &cfg[b]
		if ra.Priority != rb.Priority {
			return cmp.Compare(ra.Priority, rb.Priority)
		}
		return cmp.Compare(ra.ID, rb.ID)
	})
	// The builder's conditions are one slice: sized to the rules' condition
	// count, it is not regrown (a 100,000-rule replacement of two conditions
	// per rule regrew it from one per rule: ~30 MB of garbage).
	conds := 0
	for _, i := range idx {
		for _, v := range cfg[i].Match.values() {
			if v != "" {
				conds++
			}
		}
	}
	b := match.NewBuilder(ruleFields(), match.Options{})
	b.Grow(len(idx), conds)
	p.rules = make([]rule, 0, len(idx))
	// Every rule's reason goes into one buffer, sliced once it is a string:
	// formatting them one by one was a third of a large build's allocations.
	reasons := make([]byte, 0, len(idx)*40)
	reasonEnd := make([]int, 0, len(idx))
	var v [6]string
	for k, i := range idx {
		if k%64 == 63 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
		r := &cfg[i]
		v = r.Match.values()
		if rows, err := addRule(b, v, lib); err != nil {
			return p, fmt.Errorf("rule %d: %w", r.ID, err)
		} else if rows != 1 || p.ruleOf != nil {
			if p.ruleOf == nil {
				p.ruleOf = make([]int32, k, len(idx)+rows)
				for j := range p.ruleOf {
					p.ruleOf[j] = int32(j)
				}
			}
			for range rows {
				p.ruleOf = append(p.ruleOf, int32(k))
			}
		}
		reasons = appendRuleReason(reasons, r)
		reasonEnd = append(reasonEnd, len(reasons))
		cr := rule{id: r.ID, prio: r.Priority, action: actions.get(&r.Action), hit: &hitCounter{}}
		if r.ExpiresAt != nil {
			cr.expires = r.ExpiresAt.UnixNano()
		}
		if r.Schedule != nil {
			sc, err := compileSchedule(r.Schedule, zones)
			if err != nil {
				return p, fmt.Errorf("rule %d: %w", r.ID, err)
			}
			cr.sched = sc
		}
		if r.Match.Neighbourhood != nil {
			nb, err := compileNeighbourhood(r.Match.Neighbourhood)
			if err != nil {
				return p, fmt.Errorf("rule %d: %w", r.ID, err)
			}
			cr.neigh = nb
		}
		p.rules = append(p.rules, cr)
	}
	all := string(reasons)
	prev := 0
	for k, end := range reasonEnd {
		p.rules[k].reason = all[prev:end]
		prev = end
	}
	m, err := b.Build()
	if err != nil {
		return p, err
	}
	p.matcher = m
	return p, nil
}

// addRule adds a rule's match to b: one row, or, when fields name groups,
// a row per combination of their values. It returns the rows added.
func addRule(b *match.Builder, v [6]string, lib *Library) (int, error) {
	var groups [6][]string
	rows, named := 1, false
	for f, val := range v {
		id, ok := strings.CutPrefix(val, GroupPrefix)
		if !ok {
			continue
		}
		g := lib.groups[id]
		if g == nil {
			return 0, fieldErr("match."+ruleFieldNames[f], "group %q does not exist", id)
		}
		if len(g.vals) == 0 {
			return 0, fieldErr("match."+ruleFieldNames[f], "group %q is empty", id)
		}
		groups[f], named = g.vals, true
		rows *= len(g.vals)
		if rows > MaxRuleRows {
			return 0, fieldErr("match", "its groups expand to more than %d combinations", MaxRuleRows)
		}
	}
	if !named {
		if err := b.Add(v[:]); err != nil {
			return 0, fmt.Errorf("match.%w", err)
		}
		return 1, nil
	}
	// Odometer over the groups' values, the first field turning slowest.
	var pos [6]int
	row := v
	for n := 0; n < rows; n++ {
		for f := range groups {
			if groups[f] != nil {
				row[f] = groups[f][pos[f]]
			}
		}
		if err := b.Add(row[:]); err != nil {
			var fe *match.FieldError
			if errors.As(err, &fe) {
				return 0, fieldErr("match."+fe.Field, "group %q: %s", strings.TrimPrefix(v[fieldIndex(fe.Field)], GroupPrefix), fe.Err)
			}
			return 0, err
		}
		for f := 5; f >= 0; f-- {
			if groups[f] == nil {
				continue
			}
			if pos[f]++; pos[f] < len(groups[f]) {
				break
			}
			pos[f] = 0
		}
	}
	return rows, nil
}

func fieldIndex(name string) int {
	for i, n := range ruleFieldNames {
		if n == name {
			return i
		}
	}
	return 0
}

// appendRuleReason appends `rule 7 (priority 10) "description" matched`,
// the description cut at 80 bytes.
func appendRuleReason(b []byte, r *Rule) []byte {
	b = append(b, "rule "...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, " (priority "...)
	b = strconv.AppendInt(b, int64(r.Priority), 10)
	b = append(b, ')')
	if d := r.Description; d != "" {
		b = append(b, ' ')
		if len(d) > 80 {
			b = strconv.AppendQuote(b, d[:80]+"…")
		} else {
			b = strconv.AppendQuote(b, d)
		}
	}
	return append(b, " matched"...)
}

func compileList(kind ListKind, entries []ListEntry, listAction *Action, actions *actionSet) (entryList, error) {
	var l entryList
	if len(entries) == 0 {
		return l, nil
	}
	idx := make([]int, len(entries))
	for i := range entries {
		idx[i] = i
		if err := ValidateEntry(&entries[i]); err != nil {
			return l, fmt.Errorf("%s list entry %d: %w", kind, entries[i].ID, err)
		}
	}
	// Several entries may match one call; the lowest id is reported.
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(entries[a].ID, entries[b].ID) })
	b := match.NewBuilder(listFields(), match.Options{})
	for _, i := range idx {
		e := &entries[i]
		if err := b.Add([]string{e.Calling, e.Called}); err != nil {
			return l, fmt.Errorf("%s list entry %d: %w", kind, e.ID, err)
		}
		ce := entry{id: e.ID, reason: fmt.Sprintf("%s list entry %d (calling %s", kind, e.ID, e.Calling), hasCalled: e.Called != "", action: listAction}
		if e.Action != nil {
			ce.action = actions.get(e.Action)
		}
		if e.Called != "" {
			ce.reason += ", called " + e.Called
			l.anyCalled = true
		}
		ce.reason += ") matched"
		if e.ExpiresAt != nil {
			ce.expires = e.ExpiresAt.UnixNano()
		}
		l.entries = append(l.entries, ce)
	}
	m, err := b.Build()
	if err != nil {
		return l, err
	}
	l.matcher = m
	return l, nil
}

// actionSet shares one copy of each distinct action among a policy's
// compiled rules: bulk rule sets repeat a handful of actions, and an Action
// held by value is 120 bytes a rule (12 MB of every 100,000-rule snapshot,
// twice over while a replacement compiles beside the live one).
type actionSet struct {
	m map[actionKey]*Action
}

type actionKey struct {
	a      Action // Modify cleared: compared by value below
	modify Modify
	hasMod bool
}

func (s *actionSet) get(a *Action) *Action {
	k := actionKey{a: *a}
	if a.Modify != nil {
		k.a.Modify, k.modify, k.hasMod = nil, *a.Modify, true
	}
	if p, ok := s.m[k]; ok {
		return p
	}
	p := new(Action)
	*p = *a
	if s.m == nil {
		s.m = make(map[actionKey]*Action)
	}
	if len(s.m) < 4096 { // a set of all-distinct actions is not worth a map
		s.m[k] = p
	}
	return p
}
