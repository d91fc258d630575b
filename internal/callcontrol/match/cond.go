// Package match compiles many string conditions (exact, prefix, CUCM dial
// pattern, RE2 regex) over several fields into one immutable Matcher that
// answers "which is the first rule, in rank order, whose every condition
// holds?" without scanning the rules. It is shared by call policy and the
// director's filters; it knows nothing about calls.
package match

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// Kind is the kind of a condition.
type Kind uint8

const (
	Any     Kind = iota // no condition: every value matches
	Exact               // bare value
	Prefix              // "prefix:VALUE"
	Pattern             // "pattern:" CUCM route pattern
	Regex               // "regex:" RE2, unanchored unless the author anchors it
)

func (k Kind) String() string {
	switch k {
	case Any:
		return "any"
	case Exact:
		return "exact"
	case Prefix:
		return "prefix"
	case Pattern:
		return "pattern"
	case Regex:
		return "regex"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// FieldSpec describes one field of the values matched.
type FieldSpec struct {
	Name string
	// Text fields hold free text (device names, trigger points): exact and
	// prefix values may be any non-empty string. Otherwise values are dial
	// strings over 0-9 * # + A-D.
	Text bool
	// FoldCase compares exact and prefix values ASCII case-insensitively.
	FoldCase bool
	// NoRegex refuses "regex:" (list entries allow exact, prefix, pattern).
	NoRegex bool
	// Empty, if set, is the word that matches an empty value: a condition
	// that holds only when the field is absent (for a calling number,
	// "anonymous": a caller who withheld their number). An empty condition
	// string still means any value.
	Empty string
}

// Limits on condition values, to keep bad input from costing memory or time.
const (
	MaxValueLen    = 256
	MaxRegexLen    = 1024
	MaxPatternToks = 63 // a pattern is simulated in one uint64 of positions
)

// Cond is one parsed condition.
type Cond struct {
	Kind  Kind
	Value string // normalized value: folded if FoldCase; pattern or regex source
	toks  []tok
	re    *regexp.Regexp
}

// SyntaxError is a refused condition value. Pos is the 1-based position in
// the value after its kind prefix, 0 when the error concerns the whole value.
type SyntaxError struct {
	Kind Kind
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	if e.Kind != Exact && e.Kind != Any {
		b.WriteString(e.Kind.String())
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Pos > 0 {
		fmt.Fprintf(&b, " at position %d", e.Pos)
	}
	return b.String()
}

// Parse parses a condition value for a field. An empty value is Any.
//
// Syntax: a bare value is exact (for dial fields: an optional leading + then
// 0-9 * # A-D); "prefix:V" matches values starting with V; "pattern:P" is a
// CUCM route pattern (see ParsePattern); "regex:R" is RE2 syntax, matched
// anywhere in the value unless anchored with ^ and $.
func Parse(spec FieldSpec, s string) (Cond, error) {
	if s == "" {
		return Cond{Kind: Any}, nil
	}
	if spec.Empty != "" && s == spec.Empty {
		return Cond{Kind: Exact, Value: ""}, nil
	}
	kind, body, hasKind := splitKind(s)
	if !hasKind {
		if !spec.Text && strings.Contains(s, ":") {
			return Cond{}, &SyntaxError{Kind: Exact, Msg: fmt.Sprintf("unknown kind %q (want prefix:, pattern: or regex:)", s[:strings.IndexByte(s, ':')+1])}
		}
		kind, body = Exact, s
	}
	switch kind {
	case Exact, Prefix:
		if body == "" {
			return Cond{}, &SyntaxError{Kind: kind, Msg: "empty value"}
		}
		if len(body) > MaxValueLen {
			return Cond{}, &SyntaxError{Kind: kind, Msg: fmt.Sprintf("longer than %d bytes", MaxValueLen)}
		}
		if !spec.Text {
			if pos, msg := checkDial(body, kind == Prefix); pos > 0 {
				return Cond{}, &SyntaxError{Kind: kind, Pos: pos, Msg: msg}
			}
		}
		if spec.FoldCase {
			body = strings.ToLower(body)
		}
		return Cond{Kind: kind, Value: body}, nil
	case Pattern:
		toks, err := ParsePattern(body)
		if err != nil {
			return Cond{}, err
		}
		return Cond{Kind: Pattern, Value: body, toks: toks}, nil
	case Regex:
		if spec.NoRegex {
			return Cond{}, &SyntaxError{Kind: Regex, Msg: "not allowed here (use exact, prefix: or pattern:)"}
		}
		re, err := CompileRegex(body)
		if err != nil {
			return Cond{}, err
		}
		return Cond{Kind: Regex, Value: body, re: re}, nil
	}
	return Cond{}, &SyntaxError{Msg: "unknown kind"}
}

func splitKind(s string) (Kind, string, bool) {
	switch {
	case strings.HasPrefix(s, "prefix:"):
		return Prefix, s[len("prefix:"):], true
	case strings.HasPrefix(s, "pattern:"):
		return Pattern, s[len("pattern:"):], true
	case strings.HasPrefix(s, "regex:"):
		return Regex, s[len("regex:"):], true
	}
	return Any, s, false
}

// checkDial checks a dial string: optional leading +, then 0-9 * # A-D.
// "prefix:+" (every number in international format) is allowed.
func checkDial(s string, lonePlus bool) (int, string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '+' && i == 0 {
			continue
		}
		if sym(c) < 0 || c == '+' {
			return i + 1, fmt.Sprintf("unexpected %q (want digits 0-9 * # A-D, optional leading +)", c)
		}
	}
	if s == "+" && !lonePlus {
		return 1, "a lone + is not a number"
	}
	return 0, ""
}

// CompileRegex validates and compiles an RE2 expression with the standard
// library. Constructs RE2 refuses (look-around, backreferences) are refused
// with the parser's message, e.g. "invalid or unsupported Perl syntax: `(?!`".
func CompileRegex(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, &SyntaxError{Kind: Regex, Msg: "empty expression"}
	}
	if len(expr) > MaxRegexLen {
		return nil, &SyntaxError{Kind: Regex, Msg: fmt.Sprintf("longer than %d bytes", MaxRegexLen)}
	}
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		if se, ok := err.(*syntax.Error); ok {
			return nil, &SyntaxError{Kind: Regex, Msg: fmt.Sprintf("%s: `%s`", se.Code, se.Expr)}
		}
		return nil, &SyntaxError{Kind: Regex, Msg: err.Error()}
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, &SyntaxError{Kind: Regex, Msg: err.Error()}
	}
	return re, nil
}

// MatchString reports whether v satisfies c, by direct evaluation. It is the
// slow obvious path (and the test oracle's building block); Matcher is the
// fast one. v must already be folded for FoldCase fields.
func (c *Cond) MatchString(v string) bool {
	switch c.Kind {
	case Any:
		return true
	case Exact:
		return v == c.Value
	case Prefix:
		return strings.HasPrefix(v, c.Value)
	case Pattern:
		return matchToks(c.toks, v)
	case Regex:
		return c.re.MatchString(v)
	}
	return false
}
