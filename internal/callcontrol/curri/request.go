package curri

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// request is what serveRequest keeps of the head.
type request struct {
	method, target []byte
	http10         bool
	contentLength  int64 // -1: none
	chunked        bool
	closeConn      bool // Connection: close (or HTTP/1.0 without keep-alive)
	keepAlive10    bool
	expectContinue bool
	hosts          int
}

// serveRequest reads, answers and queues the reply to one request. It
// reports whether the connection stays open.
func (c *serverConn) serveRequest() bool {
	h := c.srv.Handler
	var rq request
	if status, reason := c.readHead(&rq); status != 0 {
		if reason != "" {
			h.countHTTP(reason)
		}
		if status > 0 {
			c.out = appendStatusOnly(c.out, status, true)
		}
		return false
	}
	policy, ok := c.policy(rq.target)
	hasBody := rq.chunked || rq.contentLength > 0
	keep := !rq.closeConn && (!rq.http10 || rq.keepAlive10)
	if !ok {
		h.countHTTP(httpErrNotFound)
		c.out = appendStatusOnly(c.out, http.StatusNotFound, !keep || hasBody)
		return keep && !hasBody
	}
	switch string(rq.method) {
	case http.MethodPost:
	case http.MethodHead:
		// CUCM's keepalive: answer at once, no body.
		if h.keepalive(policy, c.client, c.reqStart) {
			c.out = appendHeadOK(c.out, keep && !hasBody, rq.http10)
		} else {
			c.out = appendStatusOnly(c.out, http.StatusNotFound, !keep || hasBody)
		}
		if c.br.Buffered() == 0 {
			_ = c.flush()
		}
		return keep && !hasBody
	default:
		h.countHTTP(httpErrMethod)
		c.out = appendStatusOnly(c.out, http.StatusMethodNotAllowed, !keep || hasBody)
		return keep && !hasBody
	}

	st := h.begin(policy, c.client, c.reqStart)
	body, consumed, reason, err := c.readBody(&rq, st)
	closeConn := h.decide(st, body, reason, err) || !keep || c.srv.closing.Load()
	c.out = appendPostHead(c.out, len(st.out), !closeConn, rq.http10)
	c.out = append(c.out, st.out...)
	// Pipelined requests already buffered are answered in the same write.
	if c.br.Buffered() == consumed || closeConn {
		_ = c.flush()
	}
	h.finish(st) // after the write: logging never delays CUCM
	if consumed > 0 {
		_, _ = c.br.Discard(consumed)
	}
	return !closeConn
}

// readHead parses the request line and headers. A non-zero status is the
// error to answer (then close); -1 means close without answering (the
// connection failed).
func (c *serverConn) readHead(rq *request) (status int, reason string) {
	budget := c.srv.MaxHeaderBytes
	line, status, reason := c.readLine(&budget)
	if status != 0 {
		return status, reason
	}
	// Tolerate empty lines before the request line (RFC 9112 §2.2).
	for len(line) == 0 {
		if line, status, reason = c.readLine(&budget); status != 0 {
			return status, reason
		}
	}
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp2 <= sp1+1 {
		return http.StatusBadRequest, httpErrBadRequest
	}
	rq.method, rq.target = line[:sp1], line[sp1+1:sp2]
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		rq.http10 = true
	default:
		return http.StatusHTTPVersionNotSupported, httpErrBadRequest
	}
	if !isToken(rq.method) || bytes.IndexByte(rq.target, ' ') >= 0 {
		return http.StatusBadRequest, httpErrBadRequest
	}
	// The line lives in the bufio buffer, which later reads reuse: keep the
	// method and target (a few dozen bytes) in the connection's own buffer,
	// reused request after request (the request does not outlive it).
	c.head = append(append(c.head[:0], rq.method...), rq.target...)
	rq.method, rq.target = c.head[:len(rq.method)], c.head[len(rq.method):]
	rq.contentLength = -1
	for {
		line, status, reason = c.readLine(&budget)
		if status != 0 {
			return status, reason
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			// Includes whitespace before the colon and obsolete line
			// folding: both are smuggling vectors (RFC 9112 §5.1, §5.2).
			return http.StatusBadRequest, httpErrBadRequest
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case equalFoldASCII(name, "Content-Length"):
			n, ok := parseContentLength(value)
			if !ok || (rq.contentLength >= 0 && rq.contentLength != n) {
				return http.StatusBadRequest, httpErrBadRequest
			}
			rq.contentLength = n
		case equalFoldASCII(name, "Transfer-Encoding"):
			if !equalFoldASCII(value, "chunked") || rq.chunked {
				return http.StatusNotImplemented, httpErrNotImplemented
			}
			rq.chunked = true
		case equalFoldASCII(name, "Connection"):
			for rest := value; len(rest) > 0; {
				tok := rest
				if i := bytes.IndexByte(rest, ','); i >= 0 {
					tok, rest = rest[:i], rest[i+1:]
				} else {
					rest = nil
				}
				tok = bytes.Trim(tok, " \t")
				if equalFoldASCII(tok, "close") {
					rq.closeConn = true
				} else if equalFoldASCII(tok, "keep-alive") {
					rq.keepAlive10 = true
				}
			}
		case equalFoldASCII(name, "Expect"):
			if !equalFoldASCII(value, "100-continue") {
				return http.StatusExpectationFailed, httpErrBadRequest
			}
			rq.expectContinue = !rq.http10
		case equalFoldASCII(name, "Host"):
			rq.hosts++
		}
	}
	if rq.chunked && rq.contentLength >= 0 {
		return http.StatusBadRequest, httpErrBadRequest
	}
	if rq.hosts > 1 {
		// RFC 9112 §3.2 asks for exactly one Host. Two are refused (a
		// smuggling vector); none is served, since the listener serves one
		// site and CUCM peers behind proxies that strip it still need answers.
		return http.StatusBadRequest, httpErrBadRequest
	}
	return 0, ""
}

// readLine returns one header line without its CRLF (or bare LF), charged
// to budget. The slice is valid until the next read.
func (c *serverConn) readLine(budget *int) ([]byte, int, string) {
	line, err := c.br.ReadSlice('\n')
	*budget -= len(line)
	if err != nil || *budget < 0 {
		if errors.Is(err, bufio.ErrBufferFull) || *budget < 0 {
			return nil, http.StatusRequestHeaderFieldsTooLarge, httpErrHeaderTooLarge
		}
		if c.readTimeout && len(line) > 0 {
			return nil, -1, httpErrTimeout
		}
		if len(line) > 0 || !errors.Is(err, io.EOF) {
			return nil, -1, httpErrIncomplete
		}
		return nil, -1, "" // closed between requests
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, 0, ""
}

// readBody returns the request body and how many bytes of the reader it
// still occupies (Discard after use). A body that fits the reader's buffer
// is read in place; a larger or chunked one into st.body. On failure it
// returns the Handler's reason and error, as Handler.readBody does.
func (c *serverConn) readBody(rq *request, st *reqState) (body []byte, consumed int, reason string, err error) {
	h := c.srv.Handler
	if rq.contentLength > h.maxBody {
		return nil, 0, ReasonTooLarge, &DecodeError{Reason: ReasonTooLarge, Msg: "Content-Length " +
			strconv.FormatInt(rq.contentLength, 10) + " over the limit of " + strconv.FormatInt(h.maxBody, 10) + " bytes"}
	}
	if rq.expectContinue && (rq.chunked || int64(c.br.Buffered()) < rq.contentLength) {
		c.out = append(c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
		if err := c.flush(); err != nil {
			return nil, 0, reasonRead, err
		}
	}
	switch {
	case rq.chunked:
		body, err = c.readChunked(st.body[:0], h.maxBody)
		st.body = body[:0]
		if err != nil {
			reason, err := c.bodyError(err)
			return nil, 0, reason, err
		}
		return body, 0, "", nil
	case rq.contentLength <= 0:
		return nil, 0, "", nil
	case int(rq.contentLength) <= c.br.Size():
		n := int(rq.contentLength)
		b, err := c.br.Peek(n)
		if err != nil {
			reason, err := c.bodyError(err)
			return nil, 0, reason, err
		}
		return b, n, "", nil
	default:
		n := int(rq.contentLength)
		if cap(st.body) < n {
			st.body = make([]byte, n)
		}
		b := st.body[:n]
		if _, err := io.ReadFull(c.br, b); err != nil {
			reason, err := c.bodyError(err)
			return nil, 0, reason, err
		}
		return b, 0, "", nil
	}
}

func (c *serverConn) bodyError(err error) (string, error) {
	if c.readTimeout {
		return ReasonSlowBody, &DecodeError{Reason: ReasonSlowBody, Msg: "body not received in time: " + err.Error()}
	}
	if errors.Is(err, errBodyTooLarge) {
		return ReasonTooLarge, &DecodeError{Reason: ReasonTooLarge, Msg: "body over the limit of " +
			strconv.FormatInt(c.srv.Handler.maxBody, 10) + " bytes"}
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return reasonRead, errors.New("read body: " + err.Error())
}

var (
	errBodyTooLarge = errors.New("body too large")
	errBadChunk     = errors.New("malformed chunked encoding")
)

// readChunked decodes a chunked body into buf, at most limit bytes;
// extensions and trailers are read and ignored.
func (c *serverConn) readChunked(buf []byte, limit int64) ([]byte, error) {
	budget := c.srv.MaxHeaderBytes
	for {
		line, status, _ := c.readLine(&budget)
		if status != 0 {
			if status > 0 {
				return buf, errBadChunk
			}
			return buf, io.ErrUnexpectedEOF
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		line = bytes.Trim(line, " \t")
		n, err := strconv.ParseUint(string(line), 16, 63)
		if err != nil || len(line) == 0 {
			return buf, errBadChunk
		}
		if n == 0 {
			for { // trailers, up to the empty line
				line, status, _ := c.readLine(&budget)
				if status != 0 {
					return buf, errBadChunk
				}
				if len(line) == 0 {
					return buf, nil
				}
			}
		}
		if int64(len(buf))+int64(n) > limit {
			return buf, errBodyTooLarge
		}
		start := len(buf)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(c.br, buf[start:]); err != nil {
			return buf, err
		}
		if line, status, _ := c.readLine(&budget); status != 0 || len(line) != 0 {
			return buf, errBadChunk
		}
		budget = c.srv.MaxHeaderBytes
	}
}

// policy resolves a request target to its policy (Handler.policyFor),
// remembered for the connection's last target: CUCM posts every request of
// a connection to the same URL, so the policy string is made once per
// connection, not per request.
func (c *serverConn) policy(target []byte) (string, bool) {
	if c.lastTarget != "" && string(target) == c.lastTarget {
		return c.lastPolicy, c.lastOK
	}
	c.lastTarget = string(target)
	c.lastPolicy, c.lastOK = "", false
	if path, ok := requestPath(target); ok {
		c.lastPolicy, c.lastOK = c.srv.Handler.policyFor(path)
	}
	return c.lastPolicy, c.lastOK
}

// requestPath returns the path of an origin-form ("/curri?x") or
// absolute-form ("http://host/curri") request target, percent-decoded.
func requestPath(target []byte) (string, bool) {
	if len(target) == 0 {
		return "", false
	}
	if target[0] != '/' {
		u, err := url.ParseRequestURI(string(target))
		if err != nil || u.Path == "" {
			return "", false
		}
		return u.Path, true
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if bytes.IndexByte(target, '%') >= 0 {
		p, err := url.PathUnescape(string(target))
		return p, err == nil
	}
	return string(target), true
}

func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return n, true
}

// isToken reports whether b is an RFC 9110 token (method, header name).
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, ch := range b {
		if ch >= 0x80 || !tokenChar[ch] {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
