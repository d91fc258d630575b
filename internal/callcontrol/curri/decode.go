package curri

import (
	"bytes"
	"unicode/utf8"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// Reasons a request is refused. They are metric labels, so the set is small
// and fixed.
const (
	ReasonDoctype          = "doctype"
	ReasonTooLarge         = "too_large"
	ReasonMalformed        = "malformed"
	ReasonNotXACML         = "not_xacml"
	ReasonMissingAttribute = "missing_attribute"
	ReasonBadEncoding      = "bad_encoding"
	ReasonSlowBody         = "slow_body"
	ReasonEmpty            = "empty"
)

// DecodeError says why a request body was refused. Reason is one of the
// Reason* constants (a bounded metric label); Msg is for people.
type DecodeError struct {
	Reason string
	Msg    string
}

func (e *DecodeError) Error() string { return "curri: " + e.Reason + ": " + e.Msg }

func decErr(reason, msg string) *DecodeError { return &DecodeError{Reason: reason, Msg: msg} }

// maxDepth bounds element nesting; a CUCM request is four levels deep.
const maxDepth = 64

// The six Cisco attributes Decode keeps.
const (
	fCalling = iota
	fCalled
	fTransformedCalling
	fTransformedCalled
	fTrigger
	fDevice
	numFields
)

const ciscoAttrPrefix = "urn:cisco:uc:1.0:"

// fieldOther marks a urn:Cisco:uc:1.0: attribute Decode does not know.
const fieldOther = -2

// fieldFor maps a decoded AttributeId to a field index, fieldOther for
// another urn:Cisco:uc:1.0: attribute, or -1. The match is ASCII
// case-insensitive: Cisco writes "urn:Cisco:uc:1.0:", its docs lowercase.
func fieldFor(id []byte) int {
	if len(id) <= len(ciscoAttrPrefix) || !equalFoldASCII(id[:len(ciscoAttrPrefix)], ciscoAttrPrefix) {
		return -1
	}
	n := id[len(ciscoAttrPrefix):]
	switch {
	case equalFoldASCII(n, "callingnumber"):
		return fCalling
	case equalFoldASCII(n, "callednumber"):
		return fCalled
	case equalFoldASCII(n, "transformedcgpn"):
		return fTransformedCalling
	case equalFoldASCII(n, "transformedcdpn"):
		return fTransformedCalled
	case equalFoldASCII(n, "triggerpointtype"):
		return fTrigger
	case equalFoldASCII(n, "callingdevicename"):
		return fDevice
	}
	return fieldOther
}

// equalFoldASCII reports whether b equals s ignoring ASCII case only (no
// Unicode folding: the Kelvin sign is not a k on the wire).
func equalFoldASCII[T []byte | string](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// charset kinds a declaration may name.
const (
	csUTF8 = iota
	csLatin1
	csUnknown
)

func charsetKind(label []byte) int {
	switch {
	case len(label) == 0, equalFoldASCII(label, "utf-8"), equalFoldASCII(label, "utf8"),
		equalFoldASCII(label, "us-ascii"), equalFoldASCII(label, "ascii"):
		return csUTF8
	case equalFoldASCII(label, "iso-8859-1"), equalFoldASCII(label, "iso8859-1"),
		equalFoldASCII(label, "iso_8859-1"), equalFoldASCII(label, "latin1"),
		equalFoldASCII(label, "latin-1"), equalFoldASCII(label, "l1"):
		return csLatin1
	}
	return csUnknown
}

// Decode fills call from a CUCM XACML 2.0 request body.
//
// It is a single pass over the bytes with no DOM and no per-token
// allocation: the six values share one string. It accepts what CUCM and
// Cisco's documentation actually send — any element and attribute name case,
// namespace prefixes or none, either quote, comments, CDATA, the predefined
// entities and character references, a UTF-8 BOM, and the malformed
// declaration <?xml encoding="UTF-8" version="1.0"?>. The XML declaration
// decides the charset (CUCM's Content-Type says ISO-8859-1 while the body
// says UTF-8); a declared ISO-8859-1 body is converted to UTF-8.
//
// Only callednumber is required (ReasonMissingAttribute otherwise). An
// empty or absent callingnumber is a caller who withheld their number
// (callpolicy.Call.Anonymous). transformedcgpn, transformedcdpn,
// triggerpointtype and callingdevicename are left empty when absent; they
// are not copied from the untransformed values. Values are trimmed of XML
// whitespace. An attribute given twice keeps its first value, as the other
// CURRI parsers do (ElementTree's find, SAX handlers that keep the first).
//
// Any <!DOCTYPE or <!ENTITY is refused before parsing, so entity expansion
// and external entities cannot happen. Errors are always *DecodeError.
func Decode(body []byte, call *callpolicy.Call) error {
	return DecodeRequest(body, call, nil)
}

// MaxUnknown is how many unknown urn:Cisco:uc:1.0: attribute ids one
// request reports.
const MaxUnknown = 4

// Unknown collects the ids (after urn:Cisco:uc:1.0:) of Cisco attributes
// Decode does not know, so a new CUCM release's attributes get noticed. The
// ids are slices of the request body, valid while it is; an id written with
// character references is not reported.
type Unknown struct {
	IDs [MaxUnknown][]byte
	N   int
}

// DecodeRequest is Decode that also reports unknown Cisco attributes into
// unknown (which may be nil).
func DecodeRequest(body []byte, call *callpolicy.Call, unknown *Unknown) error {
	body = bytes.TrimPrefix(body, utf8BOM)
	if len(trimWS(body)) == 0 {
		return decErr(ReasonEmpty, "empty body")
	}
	if hasDirective(body) {
		return decErr(ReasonDoctype, "DOCTYPE or ENTITY declarations are refused")
	}
	var scratch [512]byte
	s := scanner{in: body, unknown: unknown}
	if unknown != nil {
		unknown.N = 0
	}
	vals, err := s.run(scratch[:0])
	if err != nil {
		return err
	}
	if !s.seen[fCalled] || s.spans[fCalled][0] == s.spans[fCalled][1] {
		return decErr(ReasonMissingAttribute, "no urn:Cisco:uc:1.0:callednumber value")
	}
	all := string(vals)
	field := func(f int) string { return all[s.spans[f][0]:s.spans[f][1]] }
	*call = callpolicy.Call{
		Calling:            field(fCalling),
		Called:             field(fCalled),
		TransformedCalling: field(fTransformedCalling),
		TransformedCalled:  field(fTransformedCalled),
		TriggerPoint:       field(fTrigger),
		DeviceName:         field(fDevice),
	}
	return nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimWS(b []byte) []byte {
	for len(b) > 0 && isWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// hasDirective reports whether b contains <!DOCTYPE or <!ENTITY in any case.
// Refusing these anywhere, even inside a comment or CDATA, is deliberate:
// CUCM never sends them and it keeps the check trivially correct.
func hasDirective(b []byte) bool {
	for {
		i := bytes.Index(b, []byte("<!"))
		if i < 0 {
			return false
		}
		b = b[i+2:]
		if len(b) >= 7 && equalFoldASCII(b[:7], "doctype") || len(b) >= 6 && equalFoldASCII(b[:6], "entity") {
			return true
		}
	}
}

func isNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '_' || c == ':' || c == '.' || c == '-' || c >= utf8.RuneSelf
}

// scanner holds the state of one Decode; it lives on Decode's stack.
type scanner struct {
	in      []byte
	pos     int
	latin1  bool
	unknown *Unknown

	stack [maxDepth][2]int // open element names as [start,end) offsets into in
	depth int
	root  int // 0 before the root element, 1 inside it, 2 after it

	// The decoded values of the six attributes are appended back to back to
	// a slice threaded through the methods rather than kept here: a slice
	// stored through *scanner would force Decode's scratch array to the heap.
	spans [numFields][2]int
	seen  [numFields]bool

	inAttr    bool // inside an <Attribute> element
	attrDepth int
	attrField int  // field of the open Attribute, or -1
	valueDone bool // the open Attribute's first AttributeValue was read
	capturing bool // inside the AttributeValue being captured
	valDepth  int
	valStart  int
}

func (s *scanner) malformed(msg string) error { return decErr(ReasonMalformed, msg) }

func (s *scanner) run(vals []byte) ([]byte, error) {
	if err := s.declaration(); err != nil {
		return nil, err
	}
	in := s.in
	for s.pos < len(in) {
		if in[s.pos] != '<' {
			j := bytes.IndexByte(in[s.pos:], '<')
			if j < 0 {
				j = len(in) - s.pos
			}
			var err error
			if vals, err = s.text(vals, in[s.pos:s.pos+j], false); err != nil {
				return nil, err
			}
			s.pos += j
			continue
		}
		if s.pos+1 >= len(in) {
			return nil, s.malformed("truncated at '<'")
		}
		var err error
		switch in[s.pos+1] {
		case '/':
			err = s.endTag(vals)
		case '?':
			err = s.procInst()
		case '!':
			vals, err = s.bang(vals)
		default:
			err = s.startTag(vals)
		}
		if err != nil {
			return nil, err
		}
	}
	if s.root == 0 {
		return nil, decErr(ReasonNotXACML, "no root element")
	}
	if s.depth > 0 {
		return nil, s.malformed("truncated: element <" + string(s.name(s.depth-1)) + "> not closed")
	}
	return vals, nil
}

func (s *scanner) name(i int) []byte { return s.in[s.stack[i][0]:s.stack[i][1]] }

// readName returns the end of the XML name starting at p (p if none).
func (s *scanner) readName(p int) int {
	for p < len(s.in) && isNameByte(s.in[p]) {
		p++
	}
	return p
}

func (s *scanner) skipWS(p int) int {
	for p < len(s.in) && isWS(s.in[p]) {
		p++
	}
	return p
}

// local returns the local part of a qualified name, or ok=false when the name
// has more than one colon (as encoding/xml refuses).
func local(name []byte) ([]byte, bool) {
	i := bytes.IndexByte(name, ':')
	if i < 0 {
		return name, true
	}
	if bytes.IndexByte(name[i+1:], ':') >= 0 {
		return nil, false
	}
	if i == 0 || i == len(name)-1 {
		return name, true
	}
	return name[i+1:], true
}

// declaration reads an XML declaration at the very start, if present, and
// picks the charset from it.
func (s *scanner) declaration() error {
	in := s.in
	if !bytes.HasPrefix(in, []byte("<?")) {
		return nil
	}
	end := s.readName(2)
	if string(in[2:end]) != "xml" {
		return nil // an ordinary PI (or a misspelt xml, refused by procInst)
	}
	p := s.skipWS(end)
	q := bytes.Index(in[p:], []byte("?>"))
	if q < 0 {
		return s.malformed("unterminated XML declaration")
	}
	content := in[p : p+q]
	if v := declParam(content, "version="); len(v) > 0 && string(v) != "1.0" {
		return s.malformed("unsupported XML version " + string(v))
	}
	switch charsetKind(declParam(content, "encoding=")) {
	case csLatin1:
		s.latin1 = true
	case csUnknown:
		return decErr(ReasonBadEncoding, "unsupported encoding "+string(declParam(content, "encoding=")))
	}
	s.pos = p + q + 2
	return nil
}

// declParam finds param (including "=") in a declaration and returns its
// quoted value. Like encoding/xml it searches rather than parses, which is
// what lets the misordered declarations CUCM samples carry through.
func declParam(s []byte, param string) []byte {
	i := 0
	var sep byte
	for i < len(s) {
		sub := s[i:]
		k := bytes.Index(sub, []byte(param))
		if k < 0 || len(param)+k >= len(sub) {
			return nil
		}
		i += len(param) + k + 1
		if c := sub[len(param)+k]; c == '\'' || c == '"' {
			sep = c
			break
		}
	}
	if sep == 0 {
		return nil
	}
	j := bytes.IndexByte(s[i:], sep)
	if j < 0 {
		return nil
	}
	return s[i : i+j]
}

func (s *scanner) procInst() error {
	in := s.in
	end := s.readName(s.pos + 2)
	if end == s.pos+2 {
		return s.malformed("expected target name after <?")
	}
	if equalFoldASCII(in[s.pos+2:end], "xml") {
		return s.malformed("XML declaration not at the start of the body")
	}
	p := s.skipWS(end)
	q := bytes.Index(in[p:], []byte("?>"))
	if q < 0 {
		return s.malformed("unterminated processing instruction")
	}
	s.pos = p + q + 2
	return nil
}

// bang handles comments and CDATA; any other <! is refused.
func (s *scanner) bang(vals []byte) ([]byte, error) {
	in := s.in[s.pos:]
	switch {
	case bytes.HasPrefix(in, []byte("<!--")):
		k := bytes.Index(in[4:], []byte("--"))
		if k < 0 || 4+k+2 >= len(in) {
			return nil, s.malformed("unterminated comment")
		}
		if in[4+k+2] != '>' {
			return nil, s.malformed(`"--" inside a comment`)
		}
		s.pos += 4 + k + 3
		return vals, nil
	case bytes.HasPrefix(in, []byte("<![CDATA[")):
		k := bytes.Index(in[9:], []byte("]]>"))
		if k < 0 {
			return nil, s.malformed("unterminated CDATA section")
		}
		vals, err := s.text(vals, in[9:9+k], true)
		if err != nil {
			return nil, err
		}
		s.pos += 9 + k + 3
		return vals, nil
	}
	return nil, s.malformed("unexpected <! declaration")
}

func (s *scanner) endTag(vals []byte) error {
	in := s.in
	start := s.pos + 2
	end := s.readName(start)
	if end == start {
		return s.malformed("expected element name after </")
	}
	p := s.skipWS(end)
	if p >= len(in) {
		return s.malformed("truncated end tag")
	}
	if in[p] != '>' {
		return s.malformed("invalid characters in end tag </" + string(in[start:end]) + ">")
	}
	name := in[start:end]
	if _, ok := local(name); !ok {
		return s.malformed("invalid name " + string(name))
	}
	if s.depth == 0 {
		return s.malformed("unexpected end tag </" + string(name) + ">")
	}
	if open := s.name(s.depth - 1); !bytes.Equal(open, name) {
		return s.malformed("element <" + string(open) + "> closed by </" + string(name) + ">")
	}
	s.pos = p + 1
	s.closeElement(vals)
	return nil
}

// closeElement pops the innermost element and ends any capture it held.
func (s *scanner) closeElement(vals []byte) {
	if s.capturing && s.depth == s.valDepth {
		v := trimWS(vals[s.valStart:])
		a := s.valStart
		for a < len(vals) && isWS(vals[a]) {
			a++
		}
		s.spans[s.attrField] = [2]int{a, a + len(v)}
		s.capturing = false
		s.valueDone = true
	}
	if s.inAttr && s.depth == s.attrDepth {
		s.inAttr = false
	}
	s.depth--
	if s.depth == 0 {
		s.root = 2
	}
}

func (s *scanner) startTag(vals []byte) error {
	in := s.in
	start := s.pos + 1
	end := s.readName(start)
	if end == start {
		return s.malformed("expected element name after <")
	}
	name := in[start:end]
	loc, ok := local(name)
	if !ok {
		return s.malformed("invalid element name " + string(name))
	}
	isAttr := equalFoldASCII(loc, "attribute")
	field := -1
	idSeen := false
	p := end
	empty := false
	for {
		p = s.skipWS(p)
		if p >= len(in) {
			return s.malformed("truncated start tag <" + string(name) + ">")
		}
		c := in[p]
		if c == '/' {
			if p+1 >= len(in) || in[p+1] != '>' {
				return s.malformed("expected /> in element <" + string(name) + ">")
			}
			empty = true
			p += 2
			break
		}
		if c == '>' {
			p++
			break
		}
		aEnd := s.readName(p)
		if aEnd == p {
			return s.malformed("expected attribute name in element <" + string(name) + ">")
		}
		aName := in[p:aEnd]
		aLocal, ok := local(aName)
		if !ok {
			return s.malformed("invalid attribute name " + string(aName))
		}
		p = s.skipWS(aEnd)
		if p >= len(in) || in[p] != '=' {
			return s.malformed("attribute " + string(aName) + " without value")
		}
		p = s.skipWS(p + 1)
		if p >= len(in) || in[p] != '"' && in[p] != '\'' {
			return s.malformed("unquoted value of attribute " + string(aName))
		}
		q := bytes.IndexByte(in[p+1:], in[p])
		if q < 0 {
			return s.malformed("unterminated value of attribute " + string(aName))
		}
		raw := in[p+1 : p+1+q]
		p += q + 2
		if bytes.IndexByte(raw, '<') >= 0 {
			return s.malformed("unescaped < in value of attribute " + string(aName))
		}
		if isAttr && !idSeen && equalFoldASCII(aLocal, "attributeid") {
			idSeen = true
			var buf [64]byte
			id, err := s.decodeChars(buf[:0], raw, kindAttr, true)
			if err != nil {
				return err
			}
			field = fieldFor(id)
			if field == fieldOther {
				if u := s.unknown; u != nil && u.N < MaxUnknown && isPlainASCII(raw) && bytes.IndexByte(raw, '&') < 0 {
					u.IDs[u.N] = raw[len(ciscoAttrPrefix):]
					u.N++
				}
				field = -1
			}
		} else if !isPlainASCII(raw) {
			if _, err := s.decodeChars(nil, raw, kindAttr, false); err != nil {
				return err
			}
		}
	}
	s.pos = p

	if s.depth == 0 {
		if s.root == 2 {
			return s.malformed("content after the root element")
		}
		if !equalFoldASCII(loc, "request") {
			return decErr(ReasonNotXACML, "root element is <"+string(name)+">, not an XACML <Request>")
		}
		s.root = 1
	}
	if s.depth == maxDepth {
		return s.malformed("elements nested too deeply")
	}
	s.stack[s.depth] = [2]int{start, end}
	s.depth++

	switch {
	case isAttr:
		if s.inAttr {
			return s.malformed("nested <Attribute> elements")
		}
		if field >= 0 {
			if s.seen[field] {
				field = -1 // the first value stands
			} else {
				s.seen[field] = true
			}
		}
		s.inAttr, s.attrDepth, s.attrField, s.valueDone = true, s.depth, field, false
	case s.inAttr && s.attrField >= 0 && !s.valueDone && !s.capturing && equalFoldASCII(loc, "attributevalue"):
		s.capturing, s.valDepth, s.valStart = true, s.depth, len(vals)
	}
	if empty {
		s.closeElement(vals)
	}
	return nil
}
