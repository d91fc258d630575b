package match

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var testFields = []FieldSpec{
	{Name: "calling"},
	{Name: "called"},
	{Name: "trigger_point", Text: true, FoldCase: true},
	{Name: "device_name", Text: true},
}

func TestParse(t *testing.T) {
	num, txt := testFields[0], testFields[2]
	tests := []struct {
		spec    FieldSpec
		in      string
		kind    Kind
		value   string
		wantErr string
	}{
		{num, "", Any, "", ""},
		{num, "+14155550100", Exact, "+14155550100", ""},
		{num, "*67#", Exact, "*67#", ""},
		{num, "12a4", 0, "", `unexpected 'a' (want digits 0-9 * # A-D, optional leading +) at position 3`},
		{num, "1+2", 0, "", `unexpected '+'`},
		{num, "+", 0, "", "lone +"},
		{num, "prefix:1800", Prefix, "1800", ""},
		{num, "prefix:", 0, "", "prefix: empty value"},
		{num, "prefix:18x", 0, "", "prefix: unexpected 'x'"},
		{num, "pattern:9.1[2-9]XX!", Pattern, "9.1[2-9]XX!", ""},
		{num, "pattern:\\+1XXX", Pattern, "\\+1XXX", ""},
		{num, "pattern:12@", 0, "", "pattern: unsupported character '@' at position 3"},
		{num, "pattern:1[2-", 0, "", "pattern: unclosed [ at position 2"},
		{num, "pattern:1[9-2]", 0, "", `pattern: bad range "9-2" (want digits low-high) at position 3`},
		{num, "pattern:[^0-9]", 0, "", "negated set excludes every digit"},
		{num, "pattern:...", 0, "", "no positions"},
		{num, "regex:^1?8(00|88)\\d{7}$", Regex, "^1?8(00|88)\\d{7}$", ""},
		{num, "regex:^\\+(?!1)", 0, "", "regex: invalid or unsupported Perl syntax: `(?!`"},
		{num, "regex:(a)\\1", 0, "", "regex: invalid escape sequence: `\\1`"},
		{num, "regex:", 0, "", "regex: empty expression"},
		{num, "foo:1", 0, "", `unknown kind "foo:"`},
		{txt, "ORIGINATING", Exact, "originating", ""},
		{txt, "foo:bar", Exact, "foo:bar", ""},
		{txt, "prefix:SEP00", Prefix, "sep00", ""},
		{FieldSpec{Name: "calling", NoRegex: true}, "regex:1", 0, "", "not allowed"},
	}
	for _, tt := range tests {
		c, err := Parse(tt.spec, tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) err = %v, want containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if c.Kind != tt.kind || c.Value != tt.value {
			t.Errorf("Parse(%q) = %v %q, want %v %q", tt.in, c.Kind, c.Value, tt.kind, tt.value)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pat string
		yes []string
		no  []string
	}{
		{"9.1[2-9]XXXXXXXXX", []string{"914155550100"}, []string{"91415555010", "911155550100", "9.14155550100", ""}},
		{"9.011!", []string{"90114", "9011441234567"}, []string{"9011", "9011*", "8011441"}},
		{"1[^5]X", []string{"100", "199"}, []string{"150", "1*0", "10"}},
		{"\\+1X!#", []string{"+155#", "+10123#"}, []string{"+15#", "155#"}},
		{"+44X", []string{"+440"}, []string{"440"}},
		{"[*#A]1", []string{"*1", "#1", "A1"}, []string{"B1", "11"}},
		{"X!X", []string{"123", "1234"}, []string{"12"}},
	}
	for _, tt := range tests {
		c, err := Parse(FieldSpec{Name: "called"}, "pattern:"+tt.pat)
		if err != nil {
			t.Fatalf("%s: %v", tt.pat, err)
		}
		src, _ := PatternRegexp(tt.pat)
		re := regexp.MustCompile(src)
		for _, v := range tt.yes {
			if !c.MatchString(v) || !re.MatchString(v) {
				t.Errorf("%s should match %q (toks %v, re %v)", tt.pat, v, c.MatchString(v), re.MatchString(v))
			}
		}
		for _, v := range tt.no {
			if c.MatchString(v) || re.MatchString(v) {
				t.Errorf("%s should not match %q", tt.pat, v)
			}
		}
	}
}

func build(t testing.TB, rules [][]string, opts Options) *Matcher {
	t.Helper()
	b := NewBuilder(testFields, opts)
	for i, r := range rules {
		if err := b.Add(r); err != nil {
			t.Fatalf("rule %d %q: %v", i, r, err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMatcherFirstWins(t *testing.T) {
	rules := [][]string{
		{"prefix:1900", "", "", ""},                 // 0
		{"", "regex:^1?8(00|88|77)\\d{7}$", "", ""}, // 1
		{"+14155550100", "", "", ""},                // 2
		{"", "", "Originating", "prefix:SEP"},       // 3
		{"pattern:1XXX", "prefix:9", "", ""},        // 4
		{"", "", "", ""},                            // 5 matches all
		{"+14155550100", "", "", ""},                // 6 shadowed by 2
	}
	m := build(t, rules, Options{})
	tests := []struct {
		vals []string
		want int
	}{
		{[]string{"19005551234", "", "", ""}, 0},
		{[]string{"19005551234", "18005551234", "", ""}, 0},
		{[]string{"5", "18005551234", "", ""}, 1},
		{[]string{"+14155550100", "5", "", ""}, 2},
		{[]string{"5", "5", "ORIGINATING", "SEP0011"}, 3},
		{[]string{"5", "5", "originating", "sep0011"}, 5},
		{[]string{"1234", "912", "", ""}, 4},
		{[]string{"12345", "912", "", ""}, 5},
	}
	for _, tt := range tests {
		if got := m.Match(tt.vals, nil); got != tt.want {
			t.Errorf("Match(%q) = %d, want %d", tt.vals, got, tt.want)
		}
	}
	// accept skips rules: the next match in rank order answers.
	if got := m.Match([]string{"19005551234", "", "", ""}, func(r int) bool { return r != 0 }); got != 5 {
		t.Errorf("with rule 0 excluded: %d, want 5", got)
	}
	if got := m.Match([]string{"x", "", "", ""}, func(r int) bool { return false }); got != -1 {
		t.Errorf("all excluded: %d, want -1", got)
	}
}

// naive is the slow obvious implementation: parse every rule, scan in order.
type naive struct {
	rules [][]Cond
}

func newNaive(t testing.TB, rules [][]string) *naive {
	n := &naive{}
	for _, r := range rules {
		var cs []Cond
		for f, v := range r {
			c, err := Parse(testFields[f], v)
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind == Pattern {
				// Oracle: the stdlib regex equivalent, not the token simulator.
				src, _ := PatternRegexp(c.Value)
				c = Cond{Kind: Regex, Value: src, re: regexp.MustCompile(src)}
			}
			cs = append(cs, c)
		}
		n.rules = append(n.rules, cs)
	}
	return n
}

func (n *naive) match(vals []string, accept func(int) bool) int {
	for r, cs := range n.rules {
		ok := true
		for f, c := range cs {
			v := vals[f]
			if testFields[f].FoldCase {
				v = strings.ToLower(v)
			}
			if !c.MatchString(v) {
				ok = false
				break
			}
		}
		if ok && (accept == nil || accept(r)) {
			return r
		}
	}
	return -1
}

// Small alphabets so that random rules and values collide often.
func randNumber(rng *rand.Rand) string {
	const alpha = "0123459*#+"
	n := 1 + rng.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[rng.IntN(len(alpha)-3)]
	}
	switch rng.IntN(8) {
	case 0:
		b = append([]byte{'+'}, b...)
	case 1:
		b = append(b, '#')
	case 2:
		return ""
	}
	return string(b)
}

func randCond(rng *rand.Rand, f int) string {
	if rng.IntN(3) == 0 {
		return ""
	}
	if testFields[f].Text {
		vals := []string{"orig", "ORIG", "term", "SEPa", "sepa", "x"}
		v := vals[rng.IntN(len(vals))]
		switch rng.IntN(4) {
		case 0:
			return "prefix:" + v[:1+rng.IntN(len(v))]
		case 1:
			return "regex:(?i)^" + v
		}
		return v
	}
	num := randNumber(rng)
	if num == "" || num == "+" {
		num = "1"
	}
	if strings.Contains(num[1:], "+") {
		num = strings.ReplaceAll(num, "+", "1")
		num = "+" + num[1:]
	}
	switch rng.IntN(6) {
	case 0:
		return num
	case 1:
		return "prefix:" + num[:1+rng.IntN(len(num))]
	case 2:
		pats := []string{"X", "1X", "[1-3]X!", "[^2]!", "!", "9.X#", "\\+X!", "+1X", "XX", "[*#]X", "1!2"}
		return "pattern:" + pats[rng.IntN(len(pats))]
	case 3:
		res := []string{"^1", "2$", "^\\+?1?2\\d{2}$", "3", "^[0-4]{2,3}$", "#", "^$", ".*"}
		return "regex:" + res[rng.IntN(len(res))]
	}
	return num
}

func TestDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 60; round++ {
		nRules := 1 + rng.IntN(300)
		rules := make([][]string, nRules)
		for i := range rules {
			rules[i] = make([]string, len(testFields))
			for f := range testFields {
				rules[i][f] = randCond(rng, f)
			}
		}
		nv := newNaive(t, rules)
		fast := build(t, rules, Options{})
		loop := build(t, rules, Options{StdlibRegex: true})
		mod := 2 + rng.IntN(5)
		accept := func(r int) bool { return r%mod != 1 }
		for q := 0; q < 300; q++ {
			vals := []string{randNumber(rng), randNumber(rng), []string{"", "orig", "ORIG", "Term"}[rng.IntN(4)], []string{"", "SEPab", "sepa", "x1"}[rng.IntN(4)]}
			want := nv.match(vals, nil)
			if got := fast.Match(vals, nil); got != want {
				t.Fatalf("round %d: Match(%q) = %d, naive %d\nrules: %q", round, vals, got, want, rules)
			}
			if got := loop.Match(vals, nil); got != want {
				t.Fatalf("round %d (stdlib regex): Match(%q) = %d, naive %d", round, vals, got, want)
			}
			want = nv.match(vals, accept)
			if got := fast.Match(vals, accept); got != want {
				t.Fatalf("round %d: Match(%q) with accept = %d, naive %d", round, vals, got, want)
			}
		}
	}
}

func TestBuildError(t *testing.T) {
	b := NewBuilder(testFields, Options{})
	err := b.Add([]string{"", "regex:(?<=1)", "", ""})
	if err == nil || !strings.HasPrefix(err.Error(), "called: regex:") {
		t.Fatalf("err = %v", err)
	}
	if err := b.Add([]string{""}); err == nil {
		t.Fatal("wrong arity accepted")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("prefix:19", "pattern:9.1[2-9]X!", "regex:^1?8(00|88)\\d{3}$", "19005", "914155")
	f.Add("+1415", "pattern:\\+1X", "regex:(?i)sep", "+1415", "+12")
	f.Fuzz(func(t *testing.T, c1, c2, c3, v1, v2 string) {
		var rules [][]string
		for _, pair := range [][2]string{{c1, c2}, {c2, c3}, {c3, ""}, {"", c1}, {c2, ""}} {
			r := []string{pair[0], pair[1], "", ""}
			ok := true
			for f, v := range r {
				if _, err := Parse(testFields[f], v); err != nil {
					ok = false
				}
			}
			if ok {
				rules = append(rules, r)
			}
		}
		if len(rules) == 0 {
			return
		}
		m := build(t, rules, Options{})
		vals := []string{v1, v2, "", ""}
		if got, want := m.Match(vals, nil), newNaive(t, rules).match(vals, nil); got != want {
			t.Fatalf("Match(%q) = %d, naive %d, rules %q", vals, got, want, rules)
		}
	})
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"9.1[2-9]XX!", "\\+44X", "[^5]!#", "[1-", "X@", "..", "[*#]"} {
		f.Add(s, "91234")
	}
	f.Fuzz(func(t *testing.T, p, v string) {
		toks, err := ParsePattern(p)
		if err != nil {
			return
		}
		src, err := PatternRegexp(p)
		if err != nil {
			t.Fatal(err)
		}
		re, err := regexp.Compile(src)
		if err != nil {
			t.Fatalf("pattern %q → bad regexp %q: %v", p, src, err)
		}
		if matchToks(toks, v) != re.MatchString(v) {
			t.Fatalf("pattern %q on %q: toks %v, regexp %v", p, v, matchToks(toks, v), re.MatchString(v))
		}
	})
}

func ExamplePatternRegexp() {
	s, _ := PatternRegexp("9.1[2-9]X!")
	fmt.Println(s)
	// Output: ^[9][1][23456789][0123456789][0123456789]+$
}

// The Empty word is a condition that holds only for an empty value; it is
// indexed like an exact value and checked like one in a rule's other fields.
func TestEmptyWord(t *testing.T) {
	fields := []FieldSpec{{Name: "calling", Empty: "anonymous"}, {Name: "called"}}
	if _, err := Parse(FieldSpec{Name: "called"}, "anonymous"); err == nil {
		t.Fatal("anonymous accepted as a dial string in a field without the word")
	}
	b := NewBuilder(fields, Options{})
	for _, r := range [][]string{
		{"anonymous", "5000"}, // 0: withheld caller to 5000
		{"prefix:+1", ""},     // 1
		{"anonymous", ""},     // 2: any withheld caller
	} {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		vals []string
		want int
	}{
		{[]string{"", "5000"}, 0},
		{[]string{"", "6000"}, 2},
		{[]string{"+1555", ""}, 1},
		{[]string{"anonymous", "5000"}, -1}, // the word is not a value
		{[]string{"5000", "5000"}, -1},
	} {
		if got := m.Match(tt.vals, nil); got != tt.want {
			t.Errorf("Match(%q) = %d, want %d", tt.vals, got, tt.want)
		}
	}
	c, _ := Parse(fields[0], "anonymous")
	if !c.MatchString("") || c.MatchString("1") {
		t.Error("MatchString disagrees with the matcher on the Empty word")
	}
}
