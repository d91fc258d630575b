package curri

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Timeouts and limits of the CURRI listener.
const (
	// ReadHeaderTimeout bounds a TLS handshake.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds a whole request from its first byte, so a client
	// trickling its headers or body holds a connection for at most this long
	// (CUCM's own routing request timer is typically 2 s, after which it
	// applies failure treatment).
	ReadTimeout = 5 * time.Second
	// WriteTimeout bounds writing a response.
	WriteTimeout = 5 * time.Second
	// IdleTimeout keeps CUCM's persistent connections open between calls;
	// CUCM probes them with HEAD (every 30 s in common configurations).
	IdleTimeout = 5 * time.Minute
	// MaxHeaderBytes bounds the request line and headers: CUCM sends seven
	// short headers.
	MaxHeaderBytes = 16 << 10
)

// Server is the CURRI listener: HTTP/1.1 with persistent connections, as
// CUCM speaks it, written for this one job rather than on net/http. Per
// request it does one read (two when the connection was idle) and one
// write, no goroutine, timer or header map: at 10,000 calls/s net/http's
// per-request machinery (a background-read goroutine, deadline resets, the
// header map and its canonicalisation) was a third of the server's CPU.
//
// What it implements of RFC 9112: request line and header parsing with the
// limits above; Content-Length and chunked request bodies (both together,
// or conflicting lengths, are refused: request smuggling); Expect:
// 100-continue; Connection: close and HTTP/1.0 keep-alive; pipelined
// requests, answered in order with one write per burst; HEAD; 400, 404,
// 405, 417, 431, 501 and 505 for what it does not serve. HTTP/2 is not
// offered, over TLS (ALPN http/1.1) or in the clear.
type Server struct {
	Addr      string
	Handler   *Handler
	TLSConfig *tls.Config // nil: plain TCP

	ReadTimeout, WriteTimeout, IdleTimeout, HandshakeTimeout time.Duration
	MaxHeaderBytes                                           int

	// ConnState, if set, is called with http.StateNew when a connection is
	// accepted and http.StateClosed when it closes.
	ConnState func(net.Conn, http.ConnState)

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	closing   atomic.Bool
	connWG    sync.WaitGroup
}

// NewServer returns the CURRI server for h with the package's timeouts. With
// a non-nil tlsConf every connection is TLS (certificates from tlsConf).
func NewServer(addr string, h *Handler, tlsConf *tls.Config) *Server {
	if tlsConf != nil {
		tlsConf = tlsConf.Clone()
		tlsConf.NextProtos = []string{"http/1.1"}
	}
	return &Server{
		Addr: addr, Handler: h, TLSConfig: tlsConf,
		ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout,
		HandshakeTimeout: ReadHeaderTimeout, MaxHeaderBytes: MaxHeaderBytes,
	}
}

// Serve accepts connections on ln until Shutdown or Close, then returns
// http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[*serverConn]struct{})
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporaryAccept(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.Handler.log.Warn("curri accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := &serverConn{srv: s, nc: nc}
		if !s.track(c, true) {
			nc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

// isTemporaryAccept is true for accept errors a server rides out: out of
// file descriptors or buffers, or a connection aborted before it was
// accepted.
func isTemporaryAccept(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ECONNRESET,
		syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) track(c *serverConn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closing.Load() {
			return false
		}
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		if s.ConnState != nil {
			s.ConnState(c.nc, http.StateNew)
		}
		return true
	}
	delete(s.conns, c)
	if s.ConnState != nil {
		s.ConnState(c.nc, http.StateClosed)
	}
	s.connWG.Done()
	return true
}

// Shutdown stops accepting, closes idle connections, and waits for those
// answering a request to finish it and close, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		for c := range s.conns {
			if c.state.CompareAndSwap(connIdle, connClosing) {
				c.nc.Close()
			}
		}
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.state.Store(connClosing)
		c.nc.Close()
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.Store(true)
	for ln := range s.listeners {
		ln.Close()
		delete(s.listeners, ln)
	}
}

// Connection states, for Shutdown.
const (
	connActive int32 = iota
	connIdle
	connClosing
)

// serverConn is one client connection.
type serverConn struct {
	srv    *Server
	nc     net.Conn // closed by Shutdown/Close
	rw     net.Conn // nc, or the TLS connection over it
	client string
	br     *bufio.Reader
	state  atomic.Int32
	out    []byte // responses not yet written

	// Deadlines are reset only when they matter, not per request: a runtime
	// timer update per read showed in the profile. inRequest makes the next
	// read of the connection arm ReadTimeout from reqStart.
	inRequest   bool
	reqStart    time.Time
	readArmed   bool      // ReadTimeout is set for the current request
	idleUntil   time.Time // the idle read deadline that is set
	writeUntil  time.Time
	readTimeout bool // the last read failed on the deadline

	head       []byte // the current request's method and target (readHead)
	lastTarget string // the last request target, its path and whether it parsed
	lastPath   string
	lastPathOK bool
}

// Read is what the connection's bufio.Reader reads through.
func (c *serverConn) Read(p []byte) (int, error) {
	if c.inRequest && !c.readArmed {
		c.readArmed = true
		c.idleUntil = time.Time{}
		_ = c.rw.SetReadDeadline(c.reqStart.Add(c.srv.ReadTimeout))
	}
	n, err := c.rw.Read(p)
	if err != nil {
		var ne net.Error
		c.readTimeout = errors.As(err, &ne) && ne.Timeout()
	}
	return n, err
}

func (c *serverConn) serve() {
	s := c.srv
	defer s.track(c, false)
	defer c.nc.Close()
	c.rw = c.nc
	c.client = c.nc.RemoteAddr().String()
	if s.TLSConfig != nil {
		tc := tls.Server(c.nc, s.TLSConfig)
		_ = c.nc.SetDeadline(time.Now().Add(s.HandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			s.Handler.countHTTP(httpErrTLS)
			s.Handler.log.Debug("curri TLS handshake failed", "client", c.client, "err", err)
			return
		}
		_ = c.nc.SetDeadline(time.Time{})
		c.rw = tc
	}
	c.br = bufio.NewReaderSize(c, s.MaxHeaderBytes)
	c.state.Store(connIdle)
	for {
		if c.br.Buffered() == 0 {
			if c.flush() != nil {
				return
			}
			// Wait for the next request under IdleTimeout, refreshing the
			// deadline only when it is a second stale.
			if now := time.Now(); c.idleUntil.Sub(now) < s.IdleTimeout-time.Second {
				c.idleUntil = now.Add(s.IdleTimeout)
				_ = c.rw.SetReadDeadline(c.idleUntil)
			}
			if _, err := c.br.Peek(1); err != nil {
				return // closed, idle timeout or Shutdown
			}
		}
		if !c.state.CompareAndSwap(connIdle, connActive) {
			return // Shutdown closed it
		}
		c.inRequest, c.readArmed, c.reqStart = true, false, time.Now()
		keep := c.serveRequest()
		c.inRequest = false
		if !keep || s.closing.Load() {
			if c.flush() == nil && !keep {
				c.lingerClose()
			}
			return
		}
		c.state.Store(connIdle)
	}
}

// lingerClose ends a connection the server gave up on mid-stream (an error
// status, a body it did not read): closing a socket with unread input sends
// a reset, which can destroy the response before the client reads it. So
// it half-closes, then reads and discards what the client still sends for a
// short while (RFC 9112 §9.6).
func (c *serverConn) lingerClose() {
	type closeWriter interface{ CloseWrite() error }
	cw, ok := c.rw.(closeWriter)
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.rw.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c.rw, 256<<10)
}

// flush writes the pending responses.
func (c *serverConn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	if now := time.Now(); c.writeUntil.Sub(now) < c.srv.WriteTimeout-time.Second {
		c.writeUntil = now.Add(c.srv.WriteTimeout)
		_ = c.rw.SetWriteDeadline(c.writeUntil)
	}
	_, err := c.rw.Write(c.out)
	c.out = c.out[:0]
	return err
}

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
	path, ok := c.requestPath(rq.target)
	policy := ""
	if ok {
		policy, ok = policyFromPath(path)
	}
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
		c.out = appendHeadOK(c.out, keep && !hasBody, rq.http10)
		if h.onHead != nil {
			h.onHead(policy)
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
	if !rq.http10 && rq.hosts != 1 {
		return http.StatusBadRequest, httpErrBadRequest // RFC 9112 §3.2: exactly one Host
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

// requestPath is requestPath(target), remembered for the connection's last
// target: CUCM posts every request of a connection to the same URL, so the
// path string is made once per connection, not per request.
func (c *serverConn) requestPath(target []byte) (string, bool) {
	if c.lastTarget != "" && string(target) == c.lastTarget {
		return c.lastPath, c.lastPathOK
	}
	c.lastTarget = string(target)
	c.lastPath, c.lastPathOK = requestPath(target)
	return c.lastPath, c.lastPathOK
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

// ---- response heads ----

// httpDate caches the Date header value, rendered once a second.
var httpDate struct {
	sec atomic.Int64
	val atomic.Pointer[[]byte]
}

func appendDate(b []byte) []byte {
	now := time.Now()
	if sec := now.Unix(); httpDate.sec.Load() != sec || httpDate.val.Load() == nil {
		v := []byte(now.UTC().Format(http.TimeFormat))
		httpDate.val.Store(&v)
		httpDate.sec.Store(sec)
	}
	b = append(b, "Date: "...)
	b = append(b, *httpDate.val.Load()...)
	return append(b, "\r\n"...)
}

var keepAliveHeader = "Keep-Alive: timeout=" + strconv.Itoa(int(IdleTimeout/time.Second)) + "\r\n"

// The Connection headers of a kept connection, built once (keepAliveHeader
// is not a constant, so concatenating it per response allocated).
var (
	keepAlive10Headers = keepAliveHeader + "Connection: keep-alive\r\n"
	keepAliveHeaders   = keepAliveHeader + "Connection: Keep-Alive\r\n"
)

func appendConnection(b []byte, keep, http10 bool) []byte {
	switch {
	case !keep:
		return append(b, "Connection: close\r\n"...)
	case http10:
		return append(b, keepAlive10Headers...)
	}
	return append(b, keepAliveHeaders...)
}

func appendOK(b []byte, http10 bool) []byte {
	if http10 {
		return append(b, "HTTP/1.0 200 OK\r\n"...)
	}
	return append(b, "HTTP/1.1 200 OK\r\n"...)
}

func appendPostHead(b []byte, n int, keep, http10 bool) []byte {
	b = appendOK(b, http10)
	b = append(b, "Content-Type: text/xml; charset=utf-8\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n"...)
	b = appendConnection(b, keep, http10)
	b = appendDate(b)
	return append(b, "\r\n"...)
}

func appendHeadOK(b []byte, keep, http10 bool) []byte {
	b = appendOK(b, http10)
	b = appendConnection(b, keep, http10)
	b = appendDate(b)
	return append(b, "\r\n"...)
}

func appendStatusOnly(b []byte, status int, closeConn bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Length: 0\r\n"...)
	if status == http.StatusMethodNotAllowed {
		b = append(b, "Allow: POST, HEAD\r\n"...)
	}
	if closeConn {
		b = append(b, "Connection: close\r\n"...)
	}
	b = appendDate(b)
	return append(b, "\r\n"...)
}

// Reasons of signalbox_curri_http_errors_total.
const (
	httpErrBadRequest     = "bad_request"
	httpErrHeaderTooLarge = "header_too_large"
	httpErrNotImplemented = "not_implemented"
	httpErrNotFound       = "not_found"
	httpErrMethod         = "method_not_allowed"
	httpErrTLS            = "tls_handshake"
	httpErrTimeout        = "timeout"
	httpErrIncomplete     = "incomplete_request"
)

var httpErrReasons = []string{httpErrBadRequest, httpErrHeaderTooLarge, httpErrNotImplemented, httpErrNotFound,
	httpErrMethod, httpErrTLS, httpErrTimeout, httpErrIncomplete}
