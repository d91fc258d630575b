package match

import (
	"regexp"

	"github.com/wasilibs/go-re2/experimental"
)

// regexSet reports which of a field's regexes match a value, as bits.
type regexSet interface {
	// matchInto sets bit i of hits for every regex i matching v. hits has
	// room for every regex and is zero on entry.
	matchInto(v string, hits []uint64)
}

// loopSet evaluates each regex in turn with the standard library. It is the
// fallback when RE2's Set cannot be built or runs out of memory, and it is
// fast enough for tens of patterns.
type loopSet struct{ res []*regexp.Regexp }

func (l loopSet) matchInto(v string, hits []uint64) {
	for i, re := range l.res {
		if re.MatchString(v) {
			hits[i>>6] |= 1 << (i & 63)
		}
	}
}

// re2Set is RE2::Set (go-re2, WASM): one pass over the value for all
// patterns, ~300 ns at 1k-5k patterns. RE2::Set can fail at its DFA memory
// limit; then the loop answers, so a call is never left undecided.
type re2Set struct {
	set  *experimental.Set
	loop loopSet
}

func (r *re2Set) matchInto(v string, hits []uint64) {
	ids, err := r.set.FindAllStringWithError(v, -1)
	if err != nil {
		r.loop.matchInto(v, hits)
		return
	}
	for _, i := range ids {
		hits[i>>6] |= 1 << (i & 63)
	}
}

// minSetSize: below it a stdlib loop beats RE2::Set's fixed WASM call cost.
const minSetSize = 8

func newRegexSet(exprs []string, res []*regexp.Regexp, forceLoop bool) regexSet {
	loop := loopSet{res: res}
	if forceLoop || len(exprs) < minSetSize {
		return loop
	}
	set, err := experimental.CompileSet(exprs)
	if err != nil {
		// A pattern the stdlib accepts but RE2 refuses, or the set is
		// too large for RE2's memory budget: the loop is correct, just slower.
		return loop
	}
	rs := &re2Set{set: set, loop: loop}
	// Warm the lazy DFA so the first real call does not pay ~1 ms.
	for _, w := range []string{"", "0", "+14155550100", "9011441234567890", "*#1234"} {
		rs.set.FindAllStringWithError(w, -1)
	}
	return rs
}
