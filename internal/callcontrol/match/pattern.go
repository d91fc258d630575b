package match

import (
	"fmt"
	"math/bits"
	"strings"
)

// The dial alphabet: 0-9 * # + A-D, 17 symbols, each a bit of a uint32 mask.
const (
	numSyms    = 17
	digitsMask = uint32(1)<<10 - 1
)

const symChars = "0123456789*#+ABCD"

// sym returns the dial-alphabet index of c, or -1.
func sym(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c == '*':
		return 10
	case c == '#':
		return 11
	case c == '+':
		return 12
	case c >= 'A' && c <= 'D':
		return 13 + int(c-'A')
	}
	return -1
}

func symBit(c byte) uint32 {
	if s := sym(c); s >= 0 {
		return 1 << s
	}
	return 0
}

// tok is one position of a compiled dial pattern: the set of symbols it
// accepts, and whether it repeats (the ! wildcard: one or more).
type tok struct {
	mask uint32
	bang bool
}

// ParsePattern compiles a CUCM route pattern. Supported syntax:
//
//	0-9 * # A-D   the symbol itself
//	+ or \+       a literal plus
//	X (or x)      any one digit 0-9
//	!             one or more digits 0-9
//	[2-9] [135]   one digit from a set; ranges are of digits, members may also be * # A-D
//	[^5] [^0-2]   one digit 0-9 not in the set
//	.             separator with no effect on matching (CUCM's discard point)
//
// A pattern matches a whole value. Anything else (e.g. @, ?, %) is refused
// with its position. At most MaxPatternToks positions.
func ParsePattern(p string) ([]tok, error) {
	if p == "" {
		return nil, &SyntaxError{Kind: Pattern, Msg: "empty pattern"}
	}
	var toks []tok
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '.':
			continue
		case c == '\\':
			if i+1 < len(p) && p[i+1] == '+' {
				toks = append(toks, tok{mask: 1 << 12})
				i++
				continue
			}
			return nil, &SyntaxError{Kind: Pattern, Pos: i + 1, Msg: `backslash may only escape + (\+)`}
		case c == 'X' || c == 'x':
			toks = append(toks, tok{mask: digitsMask})
		case c == '!':
			toks = append(toks, tok{mask: digitsMask, bang: true})
		case c == '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return nil, &SyntaxError{Kind: Pattern, Pos: i + 1, Msg: "unclosed ["}
			}
			m, pos, msg := parseSet(p[i+1 : i+end])
			if msg != "" {
				return nil, &SyntaxError{Kind: Pattern, Pos: i + 1 + pos, Msg: msg}
			}
			toks = append(toks, tok{mask: m})
			i += end
		case c == ']':
			return nil, &SyntaxError{Kind: Pattern, Pos: i + 1, Msg: "] without ["}
		case sym(c) >= 0:
			toks = append(toks, tok{mask: 1 << sym(c)})
		default:
			return nil, &SyntaxError{Kind: Pattern, Pos: i + 1, Msg: fmt.Sprintf("unsupported character %q", c)}
		}
		if len(toks) > MaxPatternToks {
			return nil, &SyntaxError{Kind: Pattern, Pos: i + 1, Msg: fmt.Sprintf("more than %d positions", MaxPatternToks)}
		}
	}
	if len(toks) == 0 {
		return nil, &SyntaxError{Kind: Pattern, Msg: "pattern has no positions (only separators)"}
	}
	return toks, nil
}

// parseSet parses the inside of [...]; pos is 1-based within s.
func parseSet(s string) (mask uint32, pos int, msg string) {
	neg := false
	i := 0
	if strings.HasPrefix(s, "^") {
		neg = true
		i = 1
	}
	if i == len(s) {
		return 0, i + 1, "empty set"
	}
	for ; i < len(s); i++ {
		c := s[i]
		if sym(c) < 0 || c == '+' {
			return 0, i + 1, fmt.Sprintf("unsupported character %q in set", c)
		}
		if i+2 < len(s) && s[i+1] == '-' {
			hi := s[i+2]
			if c < '0' || c > '9' || hi < '0' || hi > '9' || hi < c {
				return 0, i + 1, fmt.Sprintf("bad range %q (want digits low-high)", s[i:i+3])
			}
			for d := c; d <= hi; d++ {
				mask |= symBit(d)
			}
			i += 2
			continue
		}
		if c == '-' {
			return 0, i + 1, "dangling -"
		}
		mask |= symBit(c)
	}
	if neg {
		mask = digitsMask &^ mask
		if mask == 0 {
			return 0, 1, "negated set excludes every digit"
		}
	}
	return mask, 0, ""
}

func (t tok) accepts(c byte) bool { return t.mask&symBit(c) != 0 }

// matchToks simulates the pattern over all positions at once: bit p of
// states means "p tokens consumed".
func matchToks(toks []tok, v string) bool {
	if len(v) == 0 {
		return false
	}
	states := uint64(1)
	for i := 0; i < len(v) && states != 0; i++ {
		b := symBit(v[i])
		var next uint64
		for s := states; s != 0; s &= s - 1 {
			p := bits.TrailingZeros64(s)
			if p >= len(toks) {
				continue
			}
			t := toks[p]
			if t.mask&b != 0 {
				next |= 1 << (p + 1)
				if t.bang {
					next |= 1 << p
				}
			}
		}
		states = next
	}
	return states&(1<<len(toks)) != 0
}

// PatternRegexp returns an anchored RE2 expression equivalent to a CUCM
// pattern: documentation of the semantics, and the test oracle.
func PatternRegexp(p string) (string, error) {
	toks, err := ParsePattern(p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("^")
	for _, t := range toks {
		b.WriteString("[")
		for s := 0; s < numSyms; s++ {
			if t.mask&(1<<s) != 0 {
				switch c := symChars[s]; c {
				case '*', '+':
					b.WriteByte('\\')
					b.WriteByte(c)
				default:
					b.WriteByte(c)
				}
			}
		}
		b.WriteString("]")
		if t.bang {
			b.WriteString("+")
		}
	}
	b.WriteString("$")
	return b.String(), nil
}
