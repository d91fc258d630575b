package curri

import (
	"errors"
	"unicode/utf8"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// The response is assembled from these templates, which are the forms of
// Cisco's DevNet CURRI sample server byte for byte (testdata/cisco cites
// them), since those are what CUCM is known to accept. Everything after
// "<AttributeValue ...>" and before "</AttributeValue>" is CIXML that has
// already been escaped once for the XACML document, as Cisco requires
// ("The < and > characters have to be escaped as &lt; and &gt;"). Where
// the samples differ from Cisco's prose or from the one published CIXML
// schema (ver= rather than version=, an empty or absent <Status>,
// <reason> after </divert> and </reject> rather than inside them), the
// samples are followed: CUCM's parser is the judge, and the samples are what
// Cisco ran against it. The samples' XML declaration is left out: it is
// malformed (encoding before version), and without one a document is UTF-8.
const (
	permitHead = `<Response><Result><Decision>Permit</Decision><Status></Status>` +
		`<Obligations><Obligation FulfillOn="Permit" ObligationId="urn:cisco:xacml:policy-attribute">` +
		`<AttributeAssignment AttributeId="Policy:simplecontinue">` + valueOpen
	divertHead = `<Response><Result><Decision>Permit</Decision>` +
		`<Obligations><Obligation FulfillOn="Permit" ObligationId="continue.simple">` +
		`<AttributeAssignment AttributeId="Policy:continue.simple">` + valueOpen
	rejectHead = `<Response><Result><Decision>Deny</Decision><Status></Status>` +
		`<Obligations><Obligation FulfillOn="Deny" ObligationId="deny.simple">` +
		`<AttributeAssignment AttributeId="Policy:deny.simple">` + valueOpen
	// denyPlain is a Deny with nothing to say: the sample's form carries no
	// CIXML at all.
	denyPlain = `<Response><Result><Decision>Deny</Decision><Status></Status><Obligations>` +
		`<Obligation FulfillOn="Deny" ObligationId="urn:cisco:xacml:response-qualifier">` +
		`<AttributeAssignment AttributeId="urn:cisco:xacml:is-resource">` +
		`<AttributeValue DataType="http://www.w3.org/2001/XMLSchema#string">resource</AttributeValue>` +
		`</AttributeAssignment></Obligation></Obligations></Result></Response>`

	valueOpen = `<AttributeValue DataType="http://www.w3.org/2001/XMLSchema#string">&lt;cixml ver="1.0"&gt;`
	tail      = `&lt;/cixml&gt;</AttributeValue></AttributeAssignment></Obligation></Obligations></Result></Response>`

	indetHead = `<Response><Result ResourceId=""><Decision>Indeterminate</Decision><Status><StatusCode Value="`
	indetMid  = `"/><StatusMessage>`
	indetTail = `</StatusMessage><StatusDetail>Request failed</StatusDetail></Status></Result></Response>`
)

// XACML status codes for Indeterminate: missing-attribute as Cisco's sample
// writes it, the others as XACML 2.0 defines them.
const (
	statusSyntaxError      = "urn:oasis:names:tc:xacml:1.0:status:syntax-error"
	statusMissingAttribute = "urn:cisco:xacml:status:missing-attribute"
	statusProcessingError  = "urn:oasis:names:tc:xacml:1.0:status:processing-error"
)

// AppendResponse appends the XACML response for a to dst.
//
//   - permit: Decision Permit with <continue>, optionally carrying
//     <modify callingnumber=".." callednumber=".." callingname=".."
//     calledname=".."/> (lowercase names, as Cisco's samples write them) and
//     then <greeting identification=".."/>. The published CIXML schema allows
//     one or the other in a <continue>; Cisco's sample sends both, in this
//     order, to play a greeting to a call it also rewrites.
//   - divert: Decision Permit with <divert><destination>..</destination>,
//     optional <modify/> and <resetCallHistory> (only resetLastHop or
//     resetAllHops; anything else is left out), then an optional <reason> as a
//     sibling of <divert>, where Cisco's sample server puts it.
//   - deny: Decision Deny with <reject>, optional <announce identification=".."/>
//     (Announce, or Greeting when Announce is empty) and then an optional
//     <reason> after </reject>; a deny with neither is the sample's plain
//     Deny, which carries no CIXML.
//
// A divert without a destination, or an unknown decision, cannot be said in
// CIXML (CUCM would raise ErrorParsingDirectiveFromPDP), so it is answered
// Indeterminate and CUCM applies its failure treatment.
//
// Every value is XML-escaped into the CIXML, which is escaped again inside
// AttributeValue; characters XML cannot carry become U+FFFD.
func AppendResponse(dst []byte, a *callpolicy.Action) []byte {
	switch a.Decision {
	case callpolicy.Permit:
		dst = append(dst, permitHead...)
		dst = append(dst, "&lt;continue&gt;"...)
		dst = appendModify(dst, a.Modify)
		if a.Greeting != "" {
			dst = append(dst, `&lt;greeting identification="`...)
			dst = appendEscaped2(dst, a.Greeting)
			dst = append(dst, `"/&gt;`...)
		}
		dst = append(dst, "&lt;/continue&gt; "...)
	case callpolicy.Divert:
		if a.Destination == "" {
			return appendIndeterminate(dst, statusProcessingError, "divert without destination")
		}
		dst = append(dst, divertHead...)
		dst = append(dst, "&lt;divert&gt;&lt;destination&gt;"...)
		dst = appendEscaped2(dst, a.Destination)
		dst = append(dst, "&lt;/destination&gt;"...)
		dst = appendModify(dst, a.Modify)
		if a.ResetCallHistory == "resetLastHop" || a.ResetCallHistory == "resetAllHops" {
			dst = append(dst, "&lt;resetCallHistory&gt;"...)
			dst = append(dst, a.ResetCallHistory...)
			dst = append(dst, "&lt;/resetCallHistory&gt;"...)
		}
		dst = append(dst, "&lt;/divert&gt;"...)
		dst = appendReason(dst, a.Reason)
	case callpolicy.Deny:
		ann := a.Announce
		if ann == "" {
			ann = a.Greeting
		}
		if ann == "" && a.Reason == "" {
			return append(dst, denyPlain...)
		}
		dst = append(dst, rejectHead...)
		dst = append(dst, "&lt;reject&gt;"...)
		if ann != "" {
			dst = append(dst, `&lt;announce identification="`...)
			dst = appendEscaped2(dst, ann)
			dst = append(dst, `"/&gt;`...)
		}
		dst = append(dst, "&lt;/reject&gt; "...)
		dst = appendReason(dst, a.Reason)
	default:
		return appendIndeterminate(dst, statusProcessingError, "unknown decision "+a.Decision)
	}
	return append(dst, tail...)
}

func appendModify(dst []byte, m *callpolicy.Modify) []byte {
	if m == nil || *m == (callpolicy.Modify{}) {
		return dst
	}
	dst = append(dst, "&lt;modify"...)
	dst = appendAttr2(dst, ` callingnumber="`, m.CallingNumber)
	dst = appendAttr2(dst, ` callednumber="`, m.CalledNumber)
	dst = appendAttr2(dst, ` callingname="`, m.CallingName)
	dst = appendAttr2(dst, ` calledname="`, m.CalledName)
	return append(dst, "/&gt;"...)
}

func appendAttr2(dst []byte, open, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, open...)
	dst = appendEscaped2(dst, v)
	return append(dst, '"')
}

func appendReason(dst []byte, r string) []byte {
	if r == "" {
		return dst
	}
	dst = append(dst, "&lt;reason&gt;"...)
	dst = appendEscaped2(dst, r)
	return append(dst, "&lt;/reason&gt;"...)
}

// AppendIndeterminate appends an Indeterminate response with status
// syntax-error and statusMsg as its StatusMessage. CUCM applies its "Call
// Treatment on Failures" to it.
func AppendIndeterminate(dst []byte, statusMsg string) []byte {
	return appendIndeterminate(dst, statusSyntaxError, statusMsg)
}

// AppendError appends the Indeterminate response for a request that could
// not be answered: status missing-attribute for a DecodeError of reason
// missing_attribute, syntax-error for other DecodeErrors, processing-error
// for anything else. The StatusMessage names the problem.
func AppendError(dst []byte, err error) []byte {
	var de *DecodeError
	if !errors.As(err, &de) {
		return appendIndeterminate(dst, statusProcessingError, err.Error())
	}
	code := statusSyntaxError
	if de.Reason == ReasonMissingAttribute {
		code = statusMissingAttribute
	}
	dst = append(dst, indetHead...)
	dst = append(dst, code...)
	dst = append(dst, indetMid...)
	dst = appendEscaped1(dst, de.Reason)
	dst = append(dst, ": "...)
	dst = appendEscaped1(dst, de.Msg)
	return append(dst, indetTail...)
}

func appendIndeterminate(dst []byte, code, msg string) []byte {
	dst = append(dst, indetHead...)
	dst = append(dst, code...)
	dst = append(dst, indetMid...)
	dst = appendEscaped1(dst, msg)
	return append(dst, indetTail...)
}

// appendEscaped1 escapes s once, for XML text or a double-quoted attribute.
func appendEscaped1(dst []byte, s string) []byte { return appendEscaped(dst, s, false) }

// appendEscaped2 escapes s for a CIXML text or attribute value that is itself
// the text of an XACML element: escaped once for CIXML, then again.
func appendEscaped2(dst []byte, s string) []byte { return appendEscaped(dst, s, true) }

func appendEscaped(dst []byte, s string, twice bool) []byte {
	amp := "&"
	if twice {
		amp = "&amp;"
	}
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		var rep string
		n := 1
		switch {
		case c == '&':
			rep = "amp;"
		case c == '<':
			rep = "lt;"
		case c == '>':
			rep = "gt;"
		case c == '"':
			rep = "quot;"
		case c == '\'':
			rep = "apos;"
		case c == '\t':
			rep = "#x9;"
		case c == '\n':
			rep = "#xA;"
		case c == '\r':
			rep = "#xD;"
		case c < 0x20:
			rep = "#xFFFD;" // not an XML character
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			n = size
			if r == utf8.RuneError && size == 1 || !inCharRange(r) {
				rep = "#xFFFD;"
			}
		}
		if rep == "" {
			i += n
			continue
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, amp...)
		dst = append(dst, rep...)
		i += n
		last = i
	}
	return append(dst, s[last:]...)
}
