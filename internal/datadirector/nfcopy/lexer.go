package nfcopy

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The JSON lexer of Decode: a byte scanner over one record, with no
// allocation of its own (strings alias the record where they need no
// unescaping); decode.go walks the copy schema with it.

// maxDepth matches encoding/json's nesting limit so both accept the same inputs.
const maxDepth = 10000

// special marks the bytes a string scan must look at: quote, backslash,
// control characters and non-ASCII.
var special = func() (t [256]bool) {
	for i := range t {
		t[i] = i < 0x20 || i == '"' || i == '\\' || i >= 0x80
	}
	return t
}()

// decoder is the position of Decode in one record and the copy it fills.
type decoder struct {
	b []byte
	i int
	c *Copy
	// incomplete is the first problem that leaves the record a copy all
	// the same (DecodeError.Incomplete): decoding goes on past it.
	incomplete *DecodeError
}

// problem notes a field (prefix+name) the record garbles without ceasing to
// be a copy; only the first is kept.
func (d *decoder) problem(prefix, name, reason string) {
	if d.incomplete == nil {
		d.incomplete = &DecodeError{Field: prefix + name, Reason: reason, Offset: d.i, Incomplete: true}
	}
}

func (d *decoder) fail(field, reason string) error {
	return &DecodeError{Field: field, Reason: reason, Offset: d.i}
}

func (d *decoder) syntax(field string) error { return d.fail(field, "syntax") }

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at end of input).
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// object parses {"k": v, ...} at d.i, calling member with d.i at each value.
// depth is the nesting of this object (top level is 1).
func (d *decoder) object(field string, depth int, member func(key string) error) error {
	if depth > maxDepth {
		return d.syntax(field)
	}
	if d.peek() != '{' {
		if err := d.skip(field, depth); err != nil {
			return err
		}
		return d.fail(field, "bad_type")
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.syntax(field)
		}
		key, err := d.rawString(field)
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return d.syntax(field)
		}
		d.i++
		d.ws()
		if err := member(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.syntax(field)
		}
	}
}

func (d *decoder) isNull() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// digits parses an unsigned decimal of 1..maxLen ASCII digits not above max.
func digits(s []byte, max uint64) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	var n uint64
	for _, ch := range s {
		v := ch - '0'
		if v > 9 {
			return 0, false
		}
		if n > (max-uint64(v))/10 {
			return 0, false
		}
		n = n*10 + uint64(v)
	}
	return n, true
}

// intValue reads a string of digits or a JSON integer; ok=false if the value
// is of the wrong form, null=true for JSON null.
func (d *decoder) intValue(field string, max uint64) (n uint64, null, ok bool, err error) {
	switch ch := d.peek(); {
	case ch == '"':
		s, _, err := d.str(field)
		if err != nil {
			return 0, false, false, err
		}
		n, ok = digits(unsafe.Slice(unsafe.StringData(s), len(s)), max)
		return n, false, ok, nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		num, err := d.number(field)
		if err != nil {
			return 0, false, false, err
		}
		n, ok = digits(num, max)
		return n, false, ok, nil
	case ch == 'n':
		if d.isNull() {
			return 0, true, true, nil
		}
		return 0, false, false, d.syntax(field)
	default:
		if err := d.skip(field, 3); err != nil {
			return 0, false, false, err
		}
		return 0, false, false, nil
	}
}

// appendASCIIString appends the value of the string at d.i (which is '"')
// to dst in one pass, scanning and unescaping together: the body is most of
// a record and is always escaped (it is JSON in a JSON string), so the
// separate scan and unescape passes read it twice. It handles ASCII content
// with the short escapes and \u escapes outside the surrogate range. On
// anything else (non-ASCII, a surrogate, a control character, a bad escape,
// the end of input) it returns ok=false with d.i unmoved, and the caller
// takes the general path, which also reports errors.
func (d *decoder) appendASCIIString(dst []byte) (_ []byte, ok bool) {
	b := d.b
	n0 := len(dst)
	i := d.i + 1
	run := i // start of the plain bytes not yet appended
	rs := newRunScanner()
	for {
		i = rs.plainEnd(b, i)
		if i >= len(b) {
			return dst[:n0], false
		}
		switch b[i] {
		case '"':
			dst = append(dst, b[run:i]...)
			d.i = i + 1
			return dst, true
		case '\\':
			dst = append(dst, b[run:i]...)
			if i+1 >= len(b) {
				return dst[:n0], false
			}
			e := b[i+1]
			if c, ok := shortEscape(e); ok {
				dst = append(dst, c)
				i += 2
				run = i
				continue
			}
			switch e {
			case 'u':
				if i+6 > len(b) {
					return dst[:n0], false
				}
				h0, h1, h2, h3 := hexval(b[i+2]), hexval(b[i+3]), hexval(b[i+4]), hexval(b[i+5])
				if h0|h1|h2|h3 < 0 {
					return dst[:n0], false
				}
				r := rune(h0<<12 | h1<<8 | h2<<4 | h3)
				if utf16.IsSurrogate(r) {
					return dst[:n0], false
				}
				dst = utf8.AppendRune(dst, r)
				i += 4
			default:
				return dst[:n0], false
			}
			i += 2
			run = i
		default: // a control character or non-ASCII
			return dst[:n0], false
		}
	}
}

// str reads a string value (or null) for a known field.
func (d *decoder) str(field string) (s string, null bool, err error) {
	switch d.peek() {
	case '"':
		s, err = d.rawString(field)
		return s, false, err
	case 'n':
		if d.isNull() {
			return "", true, nil
		}
		return "", false, d.syntax(field)
	}
	if err := d.skip(field, 3); err != nil {
		return "", false, err
	}
	return "", false, d.fail(field, "bad_type")
}

// rawString reads the string at d.i (which is '"'), aliasing the input when
// it holds no escapes and only valid UTF-8, else unescaping into scratch.
func (d *decoder) rawString(field string) (string, error) {
	start := d.i + 1
	end, clean, err := d.scanString(field)
	if err != nil {
		return "", err
	}
	if end == start {
		return "", nil
	}
	if clean {
		return unsafe.String(&d.b[start], end-start), nil
	}
	c := d.c
	// Growing scratch leaves earlier strings on the old array, still valid.
	if cap(c.scratch)-len(c.scratch) < end-start {
		c.scratch = append(make([]byte, 0, 2*cap(c.scratch)+end-start), c.scratch...)
	}
	from := len(c.scratch)
	c.scratch = unescape(c.scratch, d.b[start:end])
	if len(c.scratch) == from {
		return "", nil
	}
	return unsafe.String(&c.scratch[from], len(c.scratch)-from), nil
}

// scanString advances past the string at d.i and returns the end offset of
// its content (the closing quote); clean means no escapes and pure ASCII or
// valid UTF-8, so the bytes are the value.
func (d *decoder) scanString(field string) (end int, clean bool, err error) {
	b := d.b
	i := d.i + 1
	clean = true
	utf := false
	rs := newRunScanner()
	for i < len(b) {
		// String content is most of a record (a padded header, the body),
		// and a byte-wise table scan was the decoder's top cost.
		i = rs.plainEnd(b, i)
		if i >= len(b) {
			break
		}
		ch := b[i]
		if ch == '"' {
			if utf && clean && !utf8.Valid(b[d.i+1:i]) {
				clean = false
			}
			d.i = i + 1
			return i, clean, nil
		}
		if ch < 0x20 {
			d.i = i
			return 0, false, d.syntax(field)
		}
		if ch == '\\' {
			clean = false
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) {
					d.i = i
					return 0, false, d.syntax(field)
				}
				for k := 1; k <= 4; k++ {
					if hexval(b[i+k]) < 0 {
						d.i = i
						return 0, false, d.syntax(field)
					}
				}
				i += 5
			default:
				d.i = i
				return 0, false, d.syntax(field)
			}
			continue
		}
		if ch >= 0x80 {
			utf = true
		}
		i++
	}
	d.i = len(b)
	return 0, false, d.syntax(field)
}

// hasSpecial reports whether any byte of w (8 bytes of a string) is special:
// a quote, a backslash, a control character or non-ASCII (SWAR tests).
func hasSpecial(w uint64) bool { return specialMask(w) != 0 }

// specialMask flags the high bit of every lane of w whose test fired. Its
// lowest set bit is exact (a borrow only carries upward, from a byte that is
// itself flagged), so it locates the first special byte; above it, lanes
// may be flagged falsely.
func specialMask(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	return (w & highs) | ((w - 0x20*ones) &^ w & highs) | zero(w^('"'*ones)) | zero(w^('\\'*ones))
}

// runScanner finds where a run of plain string bytes (none special) ends.
// The short runs between a JSON body's escapes take one or two word tests.
// Longer runs — a padded header value, a body's long fields, most of a
// record — are searched with bytes.IndexByte (vectorised) for the next quote
// and backslash, and then a three-operation word test for control and
// non-ASCII bytes, instead of the four tests of hasSpecial on every word.
// Each IndexByte result is kept until the scan passes it, so one string is
// searched in linear time whatever its escapes.
type runScanner struct{ quote, backslash int }

func newRunScanner() runScanner { return runScanner{-1, -1} }

// plainEnd returns the index of the first special byte of b at or after i,
// or len(b).
func (r *runScanner) plainEnd(b []byte, i int) int {
	if i+16 > len(b) {
		for i < len(b) && !special[b[i]] {
			i++
		}
		return i
	}
	if m := specialMask(binary.LittleEndian.Uint64(b[i:])); m != 0 {
		return i + bits.TrailingZeros64(m)/8
	}
	if m := specialMask(binary.LittleEndian.Uint64(b[i+8:])); m != 0 {
		return i + 8 + bits.TrailingZeros64(m)/8
	}
	i += 16
	if r.quote < i {
		r.quote = len(b)
		if k := bytes.IndexByte(b[i:], '"'); k >= 0 {
			r.quote = i + k
		}
	}
	if r.backslash < i {
		r.backslash = r.quote
		if k := bytes.IndexByte(b[i:r.quote], '\\'); k >= 0 {
			r.backslash = i + k
		}
	}
	stop := min(r.quote, r.backslash)
	return i + ctlOrHigh(b[i:stop])
}

// ctlOrHigh is the index of the first byte of b below 0x20 or above 0x7f, or
// len(b). A byte b sets its lane's high bit in (b-0x20)|b exactly when it is
// one of those; a borrow only carries upward from such a byte, so the lowest
// flagged lane is exact.
func ctlOrHigh(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	le := binary.LittleEndian
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w0, w1, w2, w3 := le.Uint64(b[i:]), le.Uint64(b[i+8:]), le.Uint64(b[i+16:]), le.Uint64(b[i+24:])
		if ((w0-0x20*ones)|w0|(w1-0x20*ones)|w1|(w2-0x20*ones)|w2|(w3-0x20*ones)|w3)&highs != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		w := le.Uint64(b[i:])
		if m := ((w - 0x20*ones) | w) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i] >= 0x20 && b[i] < 0x80 {
		i++
	}
	return i
}

func hexval(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// shortEscape is the byte a two-character JSON escape (\" \\ \/ \b \f \n
// \r \t) stands for; false for \u and anything else.
func shortEscape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

func hex4(s []byte) rune {
	return rune(hexval(s[0])<<12 | hexval(s[1])<<8 | hexval(s[2])<<4 | hexval(s[3]))
}

// unescape appends the value of already-validated string content s to dst,
// with encoding/json's rules: invalid UTF-8 and lone surrogates become U+FFFD.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == '\\':
			i++
			if c, ok := shortEscape(s[i]); ok {
				dst = append(dst, c)
				i++
				continue
			}
			// \uXXXX (validated)
			r := hex4(s[i+1:])
			i += 5
			if utf16.IsSurrogate(r) {
				if i+5 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 := hex4(s[i+2:])
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		case ch < utf8.RuneSelf:
			j := i + 1
			for j < len(s) && !special[s[j]] {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// number validates a JSON number at d.i and returns its bytes.
func (d *decoder) number(field string) ([]byte, error) {
	b, start, i := d.b, d.i, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		d.i = i
		return nil, d.syntax(field)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.i = i
			return nil, d.syntax(field)
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.i = i
			return nil, d.syntax(field)
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return b[start:i], nil
}

// skip validates and passes over any JSON value; depth is its nesting level.
func (d *decoder) skip(field string, depth int) error {
	switch ch := d.peek(); {
	case ch == '"':
		_, _, err := d.scanString(field)
		return err
	case ch == '{':
		return d.object(field, depth, func(string) error { return d.skip(field, depth+1) })
	case ch == '[':
		if depth > maxDepth {
			return d.syntax(field)
		}
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(field, depth+1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return d.syntax(field)
			}
		}
	case ch == '-' || (ch >= '0' && ch <= '9'):
		_, err := d.number(field)
		return err
	case ch == 't':
		return d.lit(field, "true")
	case ch == 'f':
		return d.lit(field, "false")
	case ch == 'n':
		return d.lit(field, "null")
	}
	return d.syntax(field)
}

func (d *decoder) lit(field, word string) error {
	if len(d.b)-d.i >= len(word) && string(d.b[d.i:d.i+len(word)]) == word {
		d.i += len(word)
		return nil
	}
	return d.syntax(field)
}
