package match

import (
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// Options tune a Matcher build.
type Options struct {
	// StdlibRegex evaluates regexes with a standard-library loop instead of
	// RE2::Set (tests use it as an oracle; it is also the runtime fallback).
	StdlibRegex bool
}

// Builder collects rules in rank order. Not safe for concurrent use.
type Builder struct {
	fields []FieldSpec
	opts   Options
	// The conditions other than Any of every rule, rule after rule, in one
	// slice: a 100,000-rule build would otherwise allocate a []Cond per rule.
	conds []fieldCond
	off   []int32 // rule r's conditions are conds[off[r]:off[r+1]]
}

type fieldCond struct {
	f uint8
	c Cond
}

// NewBuilder starts a matcher over the given fields.
func NewBuilder(fields []FieldSpec, opts Options) *Builder {
	return &Builder{fields: slices.Clone(fields), opts: opts, off: []int32{0}}
}

// Grow reserves room for n more rules with conds conditions between them
// (values other than ""), so that a large build does not regrow its slices.
func (b *Builder) Grow(n, conds int) {
	b.off = slices.Grow(b.off, n)
	b.conds = slices.Grow(b.conds, conds)
}

// FieldError is a condition refused by Add: which field, and why.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Add appends a rule; its rank is the number of rules added before it.
// values holds one condition string per field ("" = any).
func (b *Builder) Add(values []string) error {
	if len(values) != len(b.fields) {
		return fmt.Errorf("match: %d values for %d fields", len(values), len(b.fields))
	}
	n := len(b.conds)
	for f, v := range values {
		c, err := Parse(b.fields[f], v)
		if err != nil {
			clear(b.conds[n:])
			b.conds = b.conds[:n]
			return &FieldError{Field: b.fields[f].Name, Err: err}
		}
		if c.Kind != Any {
			b.conds = append(b.conds, fieldCond{uint8(f), c})
		}
	}
	if len(b.conds) >= math.MaxInt32 {
		clear(b.conds[n:])
		b.conds = b.conds[:n]
		return fmt.Errorf("match: too many conditions")
	}
	b.off = append(b.off, int32(len(b.conds)))
	return nil
}

// Len is the number of rules added.
func (b *Builder) Len() int { return len(b.off) - 1 }

// ruleCond is one condition of one rule, in the compact form verification uses.
type ruleCond struct {
	field uint8
	kind  Kind
	ref   int32 // Exact/Prefix: index in strs; Pattern: in pats; Regex: id in the field's set
}

type fieldIndex struct {
	spec      FieldSpec
	exact     map[string][]int32 // value → keyed rules, ascending
	trie      trie               // keyed prefix and pattern rules
	regexes   regexSet           // every distinct regex of the field
	nRegex    int
	regKeyed  [][]int32 // regex id → keyed rules, ascending
	regKeyMin int32     // lowest keyed rank, MaxInt32 if none
}

// Matcher is an immutable compiled rule set, safe for concurrent use.
type Matcher struct {
	fields   []fieldIndex
	ruleOff  []int32 // conds of rule r are conds[ruleOff[r]:ruleOff[r+1]]
	conds    []ruleCond
	strs     []string
	pats     [][]tok
	always   []int32 // rules without conditions, ascending
	nRules   int
	scratchs sync.Pool
}

// scratch is per-evaluation working memory, pooled so Match does not allocate.
type scratch struct {
	vals    []string
	fold    [][]byte
	regDone []bool
	regBits [][]uint64
	cur     []int32
	next    []int32
}

// Build compiles the rules. The Builder may be discarded afterwards.
func (b *Builder) Build() (*Matcher, error) {
	nf := len(b.fields)
	if nf > 255 {
		return nil, fmt.Errorf("match: %d fields, at most 255", nf)
	}
	if b.Len() >= math.MaxInt32 {
		return nil, fmt.Errorf("match: too many rules")
	}
	m := &Matcher{fields: make([]fieldIndex, nf), nRules: b.Len()}

	// Selectivity estimate: how many rules share a condition. The key of a
	// rule — the one condition through which candidates are found — is its
	// rarest, so no value's candidate list is long unless rules are
	// identical there too. Exact is preferred over trie over regex (regex
	// keys cost a set evaluation).
	type ck struct {
		f uint8
		k Kind
		v string
	}
	nRules := b.Len()
	// One pass over every condition numbers the distinct (field, kind,
	// value) groups and counts their rules; the rule pass below reads the
	// counts by group number, and the group number also serves as the
	// string id of exact and prefix values and as the id of an exact key,
	// so each value is hashed once (a lookup per condition in a 100,000-
	// entry map was a third of a large build).
	groupOf := make(map[ck]int32, len(b.conds))
	gid := make([]int32, len(b.conds))
	groups := make([]ck, 0, len(b.conds))
	groupN := make([]int32, 0, len(b.conds))
	for i, fc := range b.conds {
		k := ck{fc.f, fc.c.Kind, fc.c.Value}
		g, ok := groupOf[k]
		if !ok {
			g = int32(len(groups))
			groupOf[k] = g
			groups = append(groups, k)
			groupN = append(groupN, 0)
		}
		groupN[g]++
		gid[i] = g
	}
	clear(groupOf)
	weight := [...]int64{Exact: 1, Prefix: 2, Pattern: 3, Regex: 8}

	regexID := make([]map[string]int32, nf)
	regexSrc := make([][]string, nf)
	regexRes := make([][]*regexp.Regexp, nf)
	for f := range m.fields {
		m.fields[f].spec = b.fields[f]
		m.fields[f].trie.init()
		m.fields[f].regKeyMin = math.MaxInt32
		regexID[f] = make(map[string]int32)
	}
	// strOf[g]: index in m.strs of group g's value, -1 until interned.
	strOf := make([]int32, len(groups))
	for g := range strOf {
		strOf[g] = -1
	}
	// Exact keys are indexed in two passes: count the rules per value (a
	// group), then lay every value's ranks out in one shared slice, instead
	// of one small slice per value.
	exactN := make([]int32, len(groups))
	type exactKey struct{ g, rank int32 }
	var exactKeys []exactKey
	m.ruleOff = make([]int32, 0, nRules+1)
	m.conds = make([]ruleCond, 0, len(b.conds))
	m.strs = make([]string, 0, len(groups))
	for r := range nRules {
		if r%256 == 255 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
		rank := int32(r)
		lo := int(b.off[r])
		conds := b.conds[lo:b.off[r+1]]
		m.ruleOff = append(m.ruleOff, int32(len(m.conds)))
		key, keyScore := -1, int64(math.MaxInt64)
		for i := range conds {
			f, c, g := int(conds[i].f), &conds[i].c, gid[lo+i]
			if s := int64(groupN[g]) * weight[c.Kind]; s < keyScore {
				key, keyScore = i, s
			}
			rc := ruleCond{field: conds[i].f, kind: c.Kind}
			switch c.Kind {
			case Exact, Prefix:
				if strOf[g] < 0 {
					strOf[g] = int32(len(m.strs))
					m.strs = append(m.strs, c.Value)
				}
				rc.ref = strOf[g]
			case Pattern:
				rc.ref = int32(len(m.pats))
				m.pats = append(m.pats, c.toks)
			case Regex:
				id, ok := regexID[f][c.Value]
				if !ok {
					id = int32(len(regexSrc[f]))
					regexID[f][c.Value] = id
					regexSrc[f] = append(regexSrc[f], c.Value)
					regexRes[f] = append(regexRes[f], c.re)
					m.fields[f].regKeyed = append(m.fields[f].regKeyed, nil)
				}
				rc.ref = id
			}
			m.conds = append(m.conds, rc)
		}
		if key < 0 {
			m.always = append(m.always, rank)
			continue
		}
		kf := int(conds[key].f)
		fi := &m.fields[kf]
		c := &conds[key].c
		switch c.Kind {
		case Exact:
			g := gid[lo+key]
			exactN[g]++
			exactKeys = append(exactKeys, exactKey{g, rank})
		case Prefix:
			fi.trie.addPrefix(c.Value, rank)
		case Pattern:
			fi.trie.addPattern(c.toks, rank)
		case Regex:
			id := regexID[kf][c.Value]
			fi.regKeyed[id] = append(fi.regKeyed[id], rank)
			fi.regKeyMin = min(fi.regKeyMin, rank)
		}
	}
	ranks := make([]int32, len(exactKeys))
	lists := make([][]int32, len(groups))
	nKeys := make([]int, nf)
	at := int32(0)
	for g, n := range exactN {
		if n > 0 {
			lists[g] = ranks[at : at : at+n]
			at += n
			nKeys[groups[g].f]++
		}
	}
	// exactKeys are in rank order, so each value's ranks come out ascending;
	// every list has its exact capacity, so the appends never reallocate.
	for _, k := range exactKeys {
		lists[k.g] = append(lists[k.g], k.rank)
	}
	for f := range m.fields {
		if nKeys[f] > 0 {
			m.fields[f].exact = make(map[string][]int32, nKeys[f])
		}
	}
	for g, n := range exactN {
		if n > 0 {
			m.fields[groups[g].f].exact[groups[g].v] = lists[g]
		}
	}
	m.ruleOff = append(m.ruleOff, int32(len(m.conds)))
	for f := range m.fields {
		fi := &m.fields[f]
		fi.trie.finish()
		fi.nRegex = len(regexSrc[f])
		if fi.nRegex > 0 {
			fi.regexes = newRegexSet(regexSrc[f], regexRes[f], b.opts.StdlibRegex)
		}
	}
	m.scratchs.New = func() any {
		sc := &scratch{
			vals:    make([]string, nf),
			fold:    make([][]byte, nf),
			regDone: make([]bool, nf),
			regBits: make([][]uint64, nf),
		}
		for f := range m.fields {
			sc.regBits[f] = make([]uint64, (m.fields[f].nRegex+63)/64)
		}
		return sc
	}
	return m, nil
}

// Len is the number of rules.
func (m *Matcher) Len() int { return m.nRules }

// Match returns the rank of the first rule (lowest rank) whose every
// condition holds for values (one per field) and that accept (if not nil)
// admits, or -1. accept lets the caller exclude rules for reasons outside
// the values (expiry, schedules); it is called only for full matches.
func (m *Matcher) Match(values []string, accept func(rank int) bool) int {
	if len(values) != len(m.fields) {
		return -1
	}
	sc := m.scratchs.Get().(*scratch)
	best := int32(math.MaxInt32)
	for _, r := range m.always {
		if accept == nil || accept(int(r)) {
			best = r
			break
		}
	}
	ev := evaluation{m: m, sc: sc, accept: accept, best: best}
	for f := range m.fields {
		v := values[f]
		if m.fields[f].spec.FoldCase {
			v = foldInto(&sc.fold[f], v)
		}
		sc.vals[f] = v
		sc.regDone[f] = false
	}
	if ev.best > 0 {
		for f := range m.fields {
			fi := &m.fields[f]
			if list, ok := fi.exact[sc.vals[f]]; ok {
				ev.scan(list, f)
			}
			if len(fi.trie.nodes) > 1 {
				ev.walk(f)
			}
		}
		// Regex keys last: a set evaluation is the dearest step, and it is
		// skipped when a better rule has already been found.
		for f := range m.fields {
			fi := &m.fields[f]
			if fi.regKeyMin >= ev.best {
				continue
			}
			hits := ev.regexHits(f)
			for w, word := range hits {
				for ; word != 0; word &= word - 1 {
					id := w<<6 + bits.TrailingZeros64(word)
					if list := fi.regKeyed[id]; len(list) > 0 {
						ev.scan(list, f)
					}
				}
			}
		}
	}
	clear(sc.vals)
	m.scratchs.Put(sc)
	if ev.best == math.MaxInt32 {
		return -1
	}
	return int(ev.best)
}

type evaluation struct {
	m      *Matcher
	sc     *scratch
	accept func(int) bool
	best   int32
}

// scan checks a rank-ordered candidate list keyed on field key.
func (ev *evaluation) scan(list []int32, key int) {
	for _, r := range list {
		if r >= ev.best {
			return
		}
		if ev.verify(r, key) && (ev.accept == nil || ev.accept(int(r))) {
			ev.best = r
			return
		}
	}
}

// verify checks rule r's conditions other than its key.
func (ev *evaluation) verify(r int32, key int) bool {
	m := ev.m
	for _, c := range m.conds[m.ruleOff[r]:m.ruleOff[r+1]] {
		f := int(c.field)
		if f == key {
			continue
		}
		v := ev.sc.vals[f]
		switch c.kind {
		case Exact:
			if v != m.strs[c.ref] {
				return false
			}
		case Prefix:
			p := m.strs[c.ref]
			if len(v) < len(p) || v[:len(p)] != p {
				return false
			}
		case Pattern:
			if !matchToks(m.pats[c.ref], v) {
				return false
			}
		case Regex:
			if ev.regexHits(f)[c.ref>>6]&(1<<(c.ref&63)) == 0 {
				return false
			}
		}
	}
	return true
}

func (ev *evaluation) regexHits(f int) []uint64 {
	sc := ev.sc
	hits := sc.regBits[f]
	if !sc.regDone[f] {
		clear(hits)
		ev.m.fields[f].regexes.matchInto(sc.vals[f], hits)
		sc.regDone[f] = true
	}
	return hits
}

// walk runs field f's value through its trie, scanning the rules of every
// prefix reached and, at the end, of every pattern that matched whole.
func (ev *evaluation) walk(f int) {
	t := &ev.m.fields[f].trie
	v := ev.sc.vals[f]
	cur := append(ev.sc.cur[:0], 0)
	next := ev.sc.next[:0]
	for i := 0; i < len(v) && len(cur) > 0; i++ {
		c := v[i]
		bit := symBit(c)
		next = next[:0]
		for _, n := range cur {
			nd := &t.nodes[n]
			if nd.self&bit != 0 {
				next = addState(next, n)
			}
			for _, e := range t.edges[nd.edgeLo:nd.edgeHi] {
				if (e.mask == 0 && e.lit == c) || e.mask&bit != 0 {
					next = addState(next, e.child)
				}
			}
		}
		cur, next = next, cur
		// Nodes with prefix rules are reached only through literal edges,
		// so only at their depth: each is scanned once.
		for _, n := range cur {
			if l := t.nodes[n].prefixRules; len(l) > 0 {
				ev.scan(l, f)
			}
		}
	}
	if len(v) > 0 {
		for _, n := range cur {
			if l := t.nodes[n].endRules; len(l) > 0 {
				ev.scan(l, f)
			}
		}
	}
	ev.sc.cur, ev.sc.next = cur, next
}

func addState(s []int32, n int32) []int32 {
	if slices.Contains(s, n) {
		return s
	}
	return append(s, n)
}

// foldInto lower-cases ASCII of v into buf when needed, without allocating
// once buf is large enough. The result aliases buf for this evaluation only.
func foldInto(buf *[]byte, v string) string {
	i := 0
	for i < len(v) && (v[i] < 'A' || v[i] > 'Z') {
		i++
	}
	if i == len(v) {
		return v
	}
	b := append((*buf)[:0], v...)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	*buf = b
	return unsafe.String(unsafe.SliceData(b), len(b))
}
