package curri

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// decodeStd is the slow, obvious reference for Decode: encoding/xml in
// strict mode plus the same semantic rules written as plainly as possible.
// The differential fuzz test holds Decode to it wherever it accepts.
func decodeStd(body []byte, call *callpolicy.Call) error {
	body = bytes.TrimPrefix(body, []byte{0xEF, 0xBB, 0xBF})
	if strings.TrimSpace(string(body)) == "" {
		return errors.New("empty")
	}
	low := strings.ToLower(string(body))
	if strings.Contains(low, "<!doctype") || strings.Contains(low, "<!entity") {
		return errors.New("doctype")
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		switch charsetKind([]byte(label)) {
		case csUTF8:
			return r, nil
		case csLatin1:
			return latin1Reader{bufio.NewReader(r)}, nil
		}
		return nil, fmt.Errorf("charset %q", label)
	}
	const ws = " \t\r\n"
	var (
		vals                              [numFields]string
		seen                              [numFields]bool
		depth, attrDepth, valDepth, field int
		rootSeen, rootClosed, first       = false, false, true
		inAttr, valueDone, capturing      bool
		cur                               strings.Builder
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if rootClosed {
					return errors.New("second root")
				}
				if !equalFoldASCII([]byte(t.Name.Local), "request") {
					return errors.New("not a Request")
				}
				rootSeen = true
			}
			if depth == maxDepth {
				return errors.New("too deep")
			}
			depth++
			switch {
			case equalFoldASCII([]byte(t.Name.Local), "attribute"):
				if inAttr {
					return errors.New("nested Attribute")
				}
				inAttr, attrDepth, field, valueDone = true, depth, -1, false
				for _, a := range t.Attr {
					if equalFoldASCII([]byte(a.Name.Local), "attributeid") {
						field = max(fieldFor([]byte(a.Value)), -1)
						break
					}
				}
				if field >= 0 {
					if seen[field] {
						field = -1 // the first value stands
					} else {
						seen[field] = true
					}
				}
			case inAttr && field >= 0 && !valueDone && !capturing && equalFoldASCII([]byte(t.Name.Local), "attributevalue"):
				capturing, valDepth = true, depth
				cur.Reset()
			}
		case xml.EndElement:
			if capturing && depth == valDepth {
				vals[field] = strings.Trim(cur.String(), ws)
				capturing, valueDone = false, true
			}
			if inAttr && depth == attrDepth {
				inAttr = false
			}
			depth--
			if depth == 0 {
				rootClosed = true
			}
		case xml.CharData:
			if depth == 0 {
				if strings.Trim(string(t), ws) != "" {
					return errors.New("text outside root")
				}
			} else if capturing {
				cur.Write(t)
			}
		case xml.ProcInst:
			if equalFoldASCII([]byte(t.Target), "xml") && !(first && t.Target == "xml") {
				return errors.New("misplaced xml declaration")
			}
		case xml.Directive:
			return errors.New("directive")
		}
		first = false
	}
	if !rootSeen {
		return errors.New("no root")
	}
	if vals[fCalled] == "" {
		return errors.New("missing called number") // an absent calling number is an anonymous caller
	}
	*call = callpolicy.Call{
		Calling: vals[fCalling], Called: vals[fCalled],
		TransformedCalling: vals[fTransformedCalling], TransformedCalled: vals[fTransformedCalled],
		TriggerPoint: vals[fTrigger], DeviceName: vals[fDevice],
	}
	return nil
}

// latin1Reader converts ISO-8859-1 bytes to UTF-8.
type latin1Reader struct{ r *bufio.Reader }

func (l latin1Reader) Read(p []byte) (int, error) {
	n := 0
	for n+utf8.UTFMax <= len(p) {
		c, err := l.r.ReadByte()
		if err != nil {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		n += utf8.EncodeRune(p[n:], rune(c))
		if l.r.Buffered() == 0 {
			break
		}
	}
	return n, nil
}
