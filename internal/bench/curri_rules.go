package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Number spaces. Each rule kind owns a disjoint space of numbers, so a call
// drawn to hit one kind can hit no other, and a "none" call hits nothing:
//
//	calling 45xxxxxxxx  canary exact rule (one per rule-set generation)
//	calling 46xxxxxxxx  exact rules
//	calling 47xxxxxxxx  no rule (the calling number of every non-exact call)
//	calling 48xxxxxxxx  block list
//	calling 49xxxxxxxx  allow list
//	called  [+1|1]NPA(E|E')xxxx, NPA 200-599; [+1|1]8(00|88|..)NXXxxxx; (+|011)CCxxxx..  regex rules
//	called  +1NPANXXxxxx, NPA 600-799   prefix rules
//	called  9[1]NPA[2-9]xxxxxx          pattern rules
//	called  5xxxx                       no rule (internal extension)
const (
	canaryPrefix = "45"
	exactPrefix  = "46"
	missPrefix   = "47"
	blockPrefix  = "48"
	allowPrefix  = "49"
)

// RuleShape is how many rules of each kind and list entries to load.
type RuleShape struct {
	Exact   int `json:"exact"`
	Prefix  int `json:"prefix"`
	Pattern int `json:"pattern"`
	Regex   int `json:"regex"`
	Allow   int `json:"allow_entries"`
	Block   int `json:"block_entries"`
}

// Rules is the number of rules (lists excluded).
func (s RuleShape) Rules() int { return s.Exact + s.Prefix + s.Pattern + s.Regex }

func (s RuleShape) String() string {
	return fmt.Sprintf("%d rules (%d exact, %d prefix, %d pattern, %d regex), %d allow + %d block entries",
		s.Rules(), s.Exact, s.Prefix, s.Pattern, s.Regex, s.Allow, s.Block)
}

// The API's wire view of a rule and a list entry: only what the bench sends.
type ruleMatch struct {
	Calling string `json:"calling,omitempty"`
	Called  string `json:"called,omitempty"`
}

type ruleAction struct {
	Decision    string `json:"decision"`
	Reason      string `json:"reason,omitempty"`
	Destination string `json:"destination,omitempty"`
	Greeting    string `json:"greeting,omitempty"`
}

type ruleJSON struct {
	Priority    int        `json:"priority"`
	Match       ruleMatch  `json:"match"`
	Action      ruleAction `json:"action"`
	Description string     `json:"description,omitempty"`
}

type entryJSON struct {
	Calling string `json:"calling"`
	Note    string `json:"note,omitempty"`
}

// nthNumber spreads index i over 8 digits; 7919 is prime to 10^8, so the
// numbers are distinct for every i < 10^8.
func nthNumber(prefix string, i int) string {
	return fmt.Sprintf("%s%08d", prefix, (i*7919+13)%100_000_000)
}

func exactNumber(i int) string  { return nthNumber(exactPrefix, i) }
func blockNumber(i int) string  { return nthNumber(blockPrefix, i) }
func allowNumber(i int) string  { return nthNumber(allowPrefix, i) }
func canaryNumber(g int) string { return fmt.Sprintf("%s%08d", canaryPrefix, g) }

// regexRule returns the j-th regex source; dial-plan shapes vary with j:
// a 10-digit NANP number with two exchanges, toll-free with an exchange,
// and international by country code with a variable length.
func regexRule(j int) string {
	switch {
	case j%5 == 0:
		return fmt.Sprintf(`^\+?1?8(00|88|77|66|55|44|33)%03d\d{4}$`, 200+(j/5)%800)
	case j%7 == 3:
		return fmt.Sprintf(`^(\+|011)%d\d{6,10}$`, countryCode(j/7))
	default:
		npa := 200 + j%400
		e := 200 + (2*(j/400))%800
		return fmt.Sprintf(`^\+?1?%03d(%03d|%03d)\d{4}$`, npa, e, e+1)
	}
}

// countryCode avoids 1 (NANP, the prefix rules' space) and stays distinct
// for the first 780 values: 20-99, then 200-899.
func countryCode(k int) int {
	k %= 780
	if k < 80 {
		return 20 + k
	}
	return 200 + k - 80
}

// regexSample draws a called number that regexRule(j) matches.
func regexSample(j int, r *rand.Rand) string {
	nanp := [...]string{"+1", "1", ""}[r.IntN(3)]
	switch {
	case j%5 == 0:
		tf := [...]string{"00", "88", "77", "66", "55", "44", "33"}[r.IntN(7)]
		return fmt.Sprintf("%s8%s%03d%04d", nanp, tf, 200+(j/5)%800, r.IntN(10000))
	case j%7 == 3:
		intl := [...]string{"+", "011"}[r.IntN(2)]
		n := 6 + r.IntN(5)
		return fmt.Sprintf("%s%d%s", intl, countryCode(j/7), digits(r, n))
	default:
		npa := 200 + j%400
		e := 200 + (2*(j/400))%800 + r.IntN(2)
		return fmt.Sprintf("%s%03d%03d%04d", nanp, npa, e, r.IntN(10000))
	}
}

func prefixRule(k int) string {
	return fmt.Sprintf("+1%03d%03d", 600+k%200, 200+(k/200)%800)
}

func prefixSample(k int, r *rand.Rand) string {
	return fmt.Sprintf("%s%04d", prefixRule(k), r.IntN(10000))
}

// patternRule alternates long-distance (9.1NPA...) and 10-digit local
// (9.NPA...) CUCM route patterns; past 1600 patterns the exchange's first
// digit is fixed instead of [2-9], so rules stay distinct up to 12,800.
func patternRule(k int) string {
	npa, d := 200+(k/2)%800, patternDigit(k)
	ld := "1"
	if k%2 == 1 {
		ld = ""
	}
	return fmt.Sprintf("9.%s%03d%sXXXXXX", ld, npa, d)
}

func patternDigit(k int) string {
	if k < 1600 {
		return "[2-9]"
	}
	return strconv.Itoa(2 + (k/1600-1)%8)
}

func patternSample(k int, r *rand.Rand) string {
	npa := 200 + (k/2)%800
	ld := "1"
	if k%2 == 1 {
		ld = ""
	}
	d := 2 + r.IntN(8)
	if k >= 1600 {
		d = 2 + (k/1600-1)%8
	}
	return fmt.Sprintf("9%s%03d%d%s", ld, npa, d, digits(r, 6))
}

func digits(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

// buildRules renders the rule set of generation gen: the canary first (it
// proves the generation is live), then exact, regex, prefix and pattern
// rules. Exact and prefix rules deny, every tenth exact rule diverts,
// regex rules deny, pattern rules permit with a greeting.
func buildRules(s RuleShape, gen int) []ruleJSON { return buildRulesChanged(s, gen, 1) }

// buildRulesChanged is buildRules where only a fraction changed of the
// rules differ from generation 0 (their description names gen); the
// canary always does.
func buildRulesChanged(s RuleShape, gen int, changed float64) []ruleJSON {
	rules := make([]ruleJSON, 0, s.Rules()+1)
	prio := 1
	every := 0 // rules k with k%every == every-1 carry gen
	if changed > 0 && gen > 0 {
		every = max(1, int(1/changed+0.5))
	}
	k := 0
	add := func(m ruleMatch, a ruleAction, desc string) {
		if every > 0 && k%every == every-1 {
			desc += fmt.Sprintf(" (generation %d)", gen)
		}
		k++
		rules = append(rules, ruleJSON{Priority: prio, Match: m, Action: a, Description: desc})
		prio++
	}
	add(ruleMatch{Calling: canaryNumber(gen)}, ruleAction{Decision: "deny", Reason: "blocked"},
		fmt.Sprintf("bench canary, generation %d", gen))
	for i := range s.Exact {
		a := ruleAction{Decision: "deny", Reason: "blocked"}
		if i%10 == 9 {
			a = ruleAction{Decision: "divert", Destination: "5000", Reason: "unavailable"}
		}
		add(ruleMatch{Calling: exactNumber(i)}, a, "bench exact")
	}
	for j := range s.Regex {
		add(ruleMatch{Called: "regex:" + regexRule(j)}, ruleAction{Decision: "deny", Reason: "blocked"}, "bench regex")
	}
	for k := range s.Prefix {
		add(ruleMatch{Called: "prefix:" + prefixRule(k)}, ruleAction{Decision: "deny", Reason: "blocked"}, "bench prefix")
	}
	for k := range s.Pattern {
		add(ruleMatch{Called: "pattern:" + patternRule(k)}, ruleAction{Decision: "permit", Greeting: "custom_05011"}, "bench pattern")
	}
	return rules
}

func buildEntries(n int, number func(int) string, note string) []entryJSON {
	out := make([]entryJSON, n)
	for i := range out {
		out[i] = entryJSON{Calling: number(i), Note: note}
	}
	return out
}

// Request classes: which rule kind a pooled request was drawn to hit.
const (
	classExact = iota
	classRegex
	classPrefix
	classPattern
	classBlock
	classAllow
	classNone
	numClasses
)

var classNames = [numClasses]string{"exact", "regex", "prefix", "pattern", "block_list", "allow_list", "no_rule"}

// classWeights is the share of the pool drawn for each class (when the
// shape has that kind; otherwise its share goes to no_rule).
var classWeights = [numClasses]int{30, 20, 10, 10, 5, 5, 20}

// call is one pooled call's attributes and class.
type call struct {
	class   int
	calling string
	called  string
}

// drawCalls draws n calls so that every kind of the shape is hit and the
// rest miss.
func drawCalls(s RuleShape, n int, r *rand.Rand, dir int) []call {
	have := [numClasses]int{s.Exact, s.Regex, s.Prefix, s.Pattern, s.Block, s.Allow, 1}
	total := 0
	for _, w := range classWeights {
		total += w
	}
	calls := make([]call, n)
	for i := range calls {
		x := r.IntN(total)
		cl := 0
		for x >= classWeights[cl] {
			x -= classWeights[cl]
			cl++
		}
		if have[cl] == 0 {
			cl = classNone
		}
		c := call{class: cl, calling: nthNumber(missPrefix, r.IntN(100_000_000)), called: fmt.Sprintf("5%04d", r.IntN(10000))}
		if dir > 0 {
			// 90% of the callers no rule decides are in the directory.
			c.calling = nthNumber(missPrefix, r.IntN(dir+dir/9))
		}
		k := r.IntN(have[cl])
		switch cl {
		case classExact:
			c.calling = exactNumber(k)
		case classRegex:
			c.called = regexSample(k, r)
		case classPrefix:
			c.called = prefixSample(k, r)
		case classPattern:
			c.called = patternSample(k, r)
		case classBlock:
			c.calling = blockNumber(k)
		case classAllow:
			c.calling = allowNumber(k)
		}
		calls[i] = c
	}
	return calls
}
