package curri

import (
	"bytes"
	"unicode/utf8"
)

// text handles character data (raw text or a CDATA section's content):
// outside the root it must be white space, inside a captured AttributeValue
// it is appended to vals, elsewhere it is only validated.
func (s *scanner) text(vals, raw []byte, cdata bool) ([]byte, error) {
	kind := kindText
	if cdata {
		kind = kindCDATA
	}
	if !cdata && s.depth > 0 && !s.capturing && isPlainASCII(raw) {
		return vals, nil // fast path: the white space and constants between tags
	}
	if s.depth == 0 {
		var buf [64]byte
		out, err := s.decodeChars(buf[:0], raw, kind, true)
		if err != nil {
			return nil, err
		}
		if len(trimWS(out)) != 0 {
			return nil, s.malformed("text outside the root element")
		}
		return vals, nil
	}
	if s.capturing {
		return s.decodeChars(vals, raw, kind, true)
	}
	if _, err := s.decodeChars(nil, raw, kind, false); err != nil {
		return nil, err
	}
	return vals, nil
}

// isPlainASCII reports whether raw needs no decoding or validation: printable
// ASCII and white space without & or ]]>.
func isPlainASCII(raw []byte) bool {
	for i, c := range raw {
		if c >= 0x7F || c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == '&' ||
			c == '>' && i >= 2 && raw[i-1] == ']' && raw[i-2] == ']' {
			return false
		}
	}
	return true
}

// Kinds of character data.
const (
	kindText  = iota // between tags: references resolved, "]]>" forbidden
	kindCDATA        // inside <![CDATA[...]]>: no references
	kindAttr         // a quoted attribute value: references resolved
)

// decodeChars validates character data and, when keep is set, appends its
// UTF-8 decoding to dst: references resolved, CR LF and lone CR turned into
// LF (as XML requires), ISO-8859-1 bytes converted.
func (s *scanner) decodeChars(dst, raw []byte, kind int, keep bool) ([]byte, error) {
	if kind == kindText && bytes.Contains(raw, []byte("]]>")) {
		return nil, s.malformed("unescaped ]]> in text")
	}
	cdata := kind == kindCDATA
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\r':
			if keep {
				dst = append(dst, '\n')
			}
			i++
			if i < len(raw) && raw[i] == '\n' {
				i++
			}
		case c == '&' && !cdata:
			r, n, err := charRef(raw[i:])
			if err != nil {
				return nil, err
			}
			if keep {
				dst = utf8.AppendRune(dst, r)
			}
			i += n
		case c < utf8.RuneSelf:
			if c < 0x20 && c != '\t' && c != '\n' {
				return nil, s.malformed("illegal control character in text")
			}
			if keep {
				dst = append(dst, c)
			}
			i++
		case s.latin1:
			if keep {
				dst = utf8.AppendRune(dst, rune(c))
			}
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, decErr(ReasonBadEncoding, "invalid UTF-8 in text")
			}
			if !inCharRange(r) {
				return nil, s.malformed("illegal character in text")
			}
			if keep {
				dst = append(dst, raw[i:i+n]...)
			}
			i += n
		}
	}
	return dst, nil
}

func inCharRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// charRef decodes the reference at the start of b ("&...;") and returns the
// rune and the bytes consumed.
func charRef(b []byte) (rune, int, error) {
	bad := func() (rune, int, error) {
		end := min(len(b), 12)
		return 0, 0, decErr(ReasonMalformed, "invalid character entity "+string(b[:end]))
	}
	if len(b) < 3 {
		return bad()
	}
	if b[1] == '#' {
		i, base := 2, rune(10)
		if b[2] == 'x' {
			i, base = 3, 16
		}
		start := i
		var n rune
		for ; i < len(b); i++ {
			c := b[i]
			var d rune
			switch {
			case '0' <= c && c <= '9':
				d = rune(c - '0')
			case base == 16 && 'a' <= c && c <= 'f':
				d = rune(c-'a') + 10
			case base == 16 && 'A' <= c && c <= 'F':
				d = rune(c-'A') + 10
			default:
				d = -1
			}
			if d < 0 {
				break
			}
			if n <= utf8.MaxRune {
				n = n*base + d
			}
		}
		if i == start || i >= len(b) || b[i] != ';' || n > utf8.MaxRune {
			return bad()
		}
		r := n
		if !utf8.ValidRune(r) {
			r = utf8.RuneError // as string(rune(n)) does for surrogates
		}
		if !inCharRange(r) {
			return bad()
		}
		return r, i + 1, nil
	}
	semi := bytes.IndexByte(b[:min(len(b), 6)], ';')
	if semi < 0 {
		return bad()
	}
	switch string(b[1:semi]) {
	case "lt":
		return '<', semi + 1, nil
	case "gt":
		return '>', semi + 1, nil
	case "amp":
		return '&', semi + 1, nil
	case "apos":
		return '\'', semi + 1, nil
	case "quot":
		return '"', semi + 1, nil
	}
	return bad()
}
