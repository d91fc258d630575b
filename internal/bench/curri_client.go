package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// renderRequest renders a complete CURRI POST as CUCM sends it: CUCM's
// exact header spelling and order (including "Connection:Keep-Alive"
// without a space) and the XACML 2.0 request of renderBody.
func renderRequest(host, path string, c call) []byte {
	body := renderBody(c)
	var b bytes.Buffer
	b.Grow(len(body) + 300)
	b.WriteString("POST " + path + " HTTP/1.1\r\n")
	b.WriteString("Host: " + host + "\r\n")
	b.WriteString("Accept: */*\r\n")
	b.WriteString("Content-type: text/xml; charset=ISO-8859-1\r\n")
	b.WriteString("methodName: isRoleAccessAllowed\r\n")
	b.WriteString("User-Agent: CiscoUCM-HttpClient/1.0\r\n")
	b.WriteString("Connection:Keep-Alive\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	b.WriteString(body)
	return b.Bytes()
}

// renderBody renders the XACML 2.0 request of Cisco's Hello World sample
// for a call, as CUCM fills it in.
func renderBody(c call) string {
	tcgpn := "+1" + c.calling
	tcdpn := c.called
	if len(tcdpn) == 5 { // an extension: CUCM globalizes it to the site DID range
		tcdpn = "+1972555" + tcdpn[1:]
	}
	return `<?xml version="1.0" encoding="UTF-8"?>` +
		`<Request xmlns="urn:oasis:names:tc:xacml:2.0:context:schema:os">` +
		`<Subject SubjectCategory="urn:oasis:names:tc:xacml:1.0:subject-category:access-subject">` +
		`<Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:subject:role-id" DataType="http://www.w3.org/2001/XMLSchema#string" Issuer="requestor"><AttributeValue>CISCO:UC:UCMPolicy</AttributeValue></Attribute>` +
		`<Attribute AttributeId="urn:Cisco:uc:1.0:callingnumber" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>` + c.calling + `</AttributeValue></Attribute>` +
		`<Attribute AttributeId="urn:Cisco:uc:1.0:callednumber" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>` + c.called + `</AttributeValue></Attribute>` +
		`<Attribute AttributeId="urn:Cisco:uc:1.0:transformedcgpn" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>` + tcgpn + `</AttributeValue></Attribute>` +
		`<Attribute AttributeId="urn:Cisco:uc:1.0:transformedcdpn" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>` + tcdpn + `</AttributeValue></Attribute>` +
		`</Subject>` +
		`<Resource><Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:resource:resource-id" DataType="http://www.w3.org/2001/XMLSchema#anyURI"><AttributeValue>CISCO:UC:VoiceOrVideoCall</AttributeValue></Attribute></Resource>` +
		`<Action><Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:action:action-id" DataType="http://www.w3.org/2001/XMLSchema#anyURI"><AttributeValue>any</AttributeValue></Attribute></Action>` +
		`<Environment><Attribute AttributeId="urn:Cisco:uc:1.0:triggerpointtype" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>translationpattern</AttributeValue></Attribute></Environment>` +
		`</Request>`
}

// renderHead renders CUCM's keep-alive probe.
func renderHead(host, path string) []byte {
	return []byte("HEAD " + path + " HTTP/1.1\r\nHost: " + host +
		"\r\nAccept: */*\r\nUser-Agent: CiscoUCM-HttpClient/1.0\r\nConnection:Keep-Alive\r\n\r\n")
}

// Decision kinds as counted from <Decision>.
const (
	decPermit = iota
	decDeny
	decIndeterminate
	decNotApplicable
	decOther // a 200 without a recognizable Decision
	numDecisions
)

var decisionNames = [numDecisions]string{"Permit", "Deny", "Indeterminate", "NotApplicable", "other"}

// response is what the bench needs of a reply.
type response struct {
	status   int
	decision int
	close    bool // the server asked to close the connection
}

var (
	errMalformed = errors.New("malformed HTTP response")
	decOpen      = []byte("<Decision>")
	decClose     = []byte("</Decision>")
)

// maxBody bounds a response body; a CURRI reply is well under 4 KiB.
const maxBody = 1 << 20

// readResponse parses one HTTP/1.1 response just enough: the status line,
// Content-Length or chunked framing, Connection: close, and <Decision>.
// buf is reused for the body. head says the request was a HEAD (no body).
func readResponse(br *bufio.Reader, head bool, buf []byte) (response, []byte, error) {
	var resp response
	line, err := readLine(br)
	if err != nil {
		return resp, buf, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return resp, buf, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 || code > 999 {
		return resp, buf, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	resp.status = code
	clen, chunked := -1, false
	for {
		line, err = readLine(br)
		if err != nil {
			return resp, buf, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return resp, buf, fmt.Errorf("%w: header line %q", errMalformed, clip(line))
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 || n > maxBody {
				return resp, buf, fmt.Errorf("%w: Content-Length %q", errMalformed, clip(value))
			}
			clen = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			resp.close = asciiEqualFold(value, "close")
		}
	}
	if head || code == 204 || code == 304 || code/100 == 1 {
		return resp, buf, nil
	}
	buf = buf[:0]
	switch {
	case chunked:
		if buf, err = readChunked(br, buf); err != nil {
			return resp, buf, err
		}
	case clen >= 0:
		if cap(buf) < clen {
			buf = make([]byte, clen)
		}
		buf = buf[:clen]
		if _, err := io.ReadFull(br, buf); err != nil {
			return resp, buf, fmt.Errorf("read body: %w", err)
		}
	default:
		// No framing: the body runs to EOF (HTTP/1.0 style), so the
		// connection cannot be reused.
		resp.close = true
		b, err := io.ReadAll(io.LimitReader(br, maxBody))
		if err != nil {
			return resp, buf, fmt.Errorf("read body: %w", err)
		}
		buf = append(buf, b...)
	}
	resp.decision = parseDecision(buf)
	return resp, buf, nil
}

// parseDecision finds the XACML Decision in a response body.
func parseDecision(body []byte) int {
	i := bytes.Index(body, decOpen)
	if i < 0 {
		return decOther
	}
	rest := body[i+len(decOpen):]
	j := bytes.Index(rest, decClose)
	if j < 0 {
		return decOther
	}
	switch string(bytes.TrimSpace(rest[:j])) {
	case "Permit":
		return decPermit
	case "Deny":
		return decDeny
	case "Indeterminate":
		return decIndeterminate
	case "NotApplicable":
		return decNotApplicable
	}
	return decOther
}

func readChunked(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		line, err := readLine(br)
		if err != nil {
			return buf, err
		}
		sz, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(sz)), 16, 32)
		if err != nil || n < 0 || int(n)+len(buf) > maxBody {
			return buf, fmt.Errorf("%w: chunk size %q", errMalformed, clip(line))
		}
		if n == 0 {
			for { // trailers up to the empty line
				line, err = readLine(br)
				if err != nil {
					return buf, err
				}
				if len(line) == 0 {
					return buf, nil
				}
			}
		}
		start := len(buf)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(br, buf[start:]); err != nil {
			return buf, fmt.Errorf("read chunk: %w", err)
		}
		if line, err = readLine(br); err != nil || len(line) != 0 {
			return buf, fmt.Errorf("%w: no CRLF after chunk", errMalformed)
		}
	}
}

// readLine reads a CRLF- (or LF-) terminated line without the terminator.
// The slice is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errMalformed, br.Size())
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// conn is one CUCM-like keep-alive connection.
type conn struct {
	addr     string
	head     []byte
	timeout  time.Duration
	tlsConf  *tls.Config // nil: plain HTTP
	c        net.Conn
	br       *bufio.Reader
	body     []byte
	deadline time.Time // set on c.c

	nextReconnect time.Time // -reconnect-every
}

func newConn(addr string, head []byte, timeout time.Duration) *conn {
	return &conn{addr: addr, head: head, timeout: timeout, body: make([]byte, 0, 4096)}
}

// connect dials and sends the HEAD keep-alive probe, as CUCM does before
// routing calls over a connection.
func (c *conn) connect() error {
	c.close()
	nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
	if err != nil {
		return fmt.Errorf("dial %s: %w", c.addr, err)
	}
	if c.tlsConf != nil {
		tc := tls.Client(nc, c.tlsConf)
		_ = tc.SetDeadline(time.Now().Add(c.timeout))
		if err := tc.Handshake(); err != nil {
			nc.Close()
			return fmt.Errorf("TLS handshake with %s: %w", c.addr, err)
		}
		nc = tc
	}
	c.c, c.deadline = nc, time.Time{}
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 16<<10)
	} else {
		c.br.Reset(nc)
	}
	resp, err := c.roundTrip(c.head, true)
	if err != nil {
		c.close()
		return fmt.Errorf("HEAD probe: %w", err)
	}
	if resp.status != 200 && resp.status != 204 {
		c.close()
		return fmt.Errorf("HEAD probe: status %d (want 200 or 204)", resp.status)
	}
	return nil
}

// do sends one pre-rendered request, connecting first if needed. A
// transport error closes the connection; the next call redials.
func (c *conn) do(req []byte) (response, error) {
	if c.c == nil {
		if err := c.connect(); err != nil {
			return response{}, err
		}
	}
	resp, err := c.roundTrip(req, false)
	if err != nil || resp.close {
		c.close()
	}
	return resp, err
}

func (c *conn) roundTrip(req []byte, head bool) (response, error) {
	// The deadline moves only when it is a tenth of the timeout stale: two
	// runtime timer updates per call are CPU the generator takes from the
	// server it shares the cores with.
	if now := time.Now(); c.deadline.Sub(now) < c.timeout-c.timeout/10 {
		c.deadline = now.Add(c.timeout)
		if err := c.c.SetDeadline(c.deadline); err != nil {
			return response{}, err
		}
	}
	if _, err := c.c.Write(req); err != nil {
		return response{}, fmt.Errorf("write: %w", err)
	}
	resp, body, err := readResponse(c.br, head, c.body)
	c.body = body[:0]
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("server closed the connection: %w", err)
		}
		return resp, err
	}
	return resp, nil
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}
