package curri

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

	// Handshakes bounds the TLS handshakes computed at once (default: half
	// the Ps, at least one). A full handshake costs the server a private-key
	// operation, about a millisecond for RSA-2048, and a client that opens
	// connections as it falls behind (a generator growing its workers, CUCM
	// nodes failing over together) would otherwise have every P signing
	// while the calls of the connections already up wait in the run queue:
	// latency rises, the client opens more, and the box spends itself on
	// handshakes (a 2.4 s call seen so). The rest wait their turn, within
	// HandshakeTimeout from accept.
	Handshakes int
	hsOnce     sync.Once
	hsSem      chan struct{}
	hsConf     *tls.Config // TLSConfig, taking a turn once the ClientHello is read

	// ConnState, if set, is called with http.StateNew when a connection is
	// accepted and http.StateClosed when it closes.
	ConnState func(net.Conn, http.ConnState)

	// Access says who may connect (nil: anyone); set before Serve.
	Access *Access

	mu            sync.Mutex
	listeners     map[net.Listener]struct{}
	conns         map[*serverConn]struct{}
	perAddr       map[netip.Addr]int   // connections open per client address, with Access.MaxConnsPerClient
	refusedLogged map[string]time.Time // reason and address -> last logged (refuse)
	closing       atomic.Bool
	connWG        sync.WaitGroup
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
		s.perAddr = make(map[netip.Addr]int)
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
		addr := remoteAddr(nc)
		if !s.admit(nc, addr) {
			continue
		}
		c := &serverConn{srv: s, nc: nc, addr: addr}
		if !s.track(c, true) {
			s.mu.Lock()
			s.releaseLocked(addr)
			s.mu.Unlock()
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
		s.Handler.conns.Inc()
		if s.ConnState != nil {
			s.ConnState(c.nc, http.StateNew)
		}
		return true
	}
	delete(s.conns, c)
	s.releaseLocked(c.addr)
	s.Handler.conns.Dec()
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
	addr   netip.Addr
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
	lastTarget string // the last request target, its policy and whether it resolved
	lastPolicy string
	lastOK     bool
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
		tc, err := s.handshake(c.nc)
		if err != nil {
			if id, refused := isIdentityRefusal(err); refused {
				s.refuse(RefusedIdentity, c.addr, c.client, id+" (-curri-client-names)")
			} else {
				s.Handler.countHTTP(httpErrTLS)
				s.Handler.log.Debug("curri TLS handshake failed", "client", c.client, "err", err)
			}
			// Closing with the client's first request unread would reset
			// the connection, and the client could lose the alert that
			// says why.
			c.lingerClose()
			return
		}
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

// handshake runs the server side of a TLS handshake on nc within
// HandshakeTimeout. The part that costs CPU, from the whole ClientHello read
// (GetConfigForClient) to the server's flight written (the key exchange and
// the signature), waits for one of s.Handshakes turns; a client that
// connects and sends nothing, trickles its hello, or stalls after the
// server's flight holds none.
func (s *Server) handshake(nc net.Conn) (*tls.Conn, error) {
	s.hsOnce.Do(func() {
		n := s.Handshakes
		if n <= 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		s.hsSem = make(chan struct{}, n)
		s.hsConf = s.TLSConfig.Clone()
		if s.Access != nil && len(s.Access.Names) > 0 {
			s.hsConf.VerifyConnection = s.Access.verifyConnection
		}
		next := s.TLSConfig.GetConfigForClient
		s.hsConf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hc, ok := hello.Conn.(*hsConn); ok && hc.state == hsWaiting {
				if !hc.acquire() {
					hc.state = hsDone
					return nil, errNoHandshakeTurn
				}
				hc.state, hc.took = hsHolding, time.Now()
			}
			if next != nil {
				return next(hello)
			}
			return nil, nil
		}
	})
	deadline := time.Now().Add(s.HandshakeTimeout)
	hc := &hsConn{Conn: nc, sem: s.hsSem, deadline: deadline, waited: s.Handler.handshakeWaits}
	defer hc.release()
	tc := tls.Server(hc, s.hsConf)
	_ = nc.SetDeadline(deadline)
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return tc, nil
}

// hsConn is the connection under a server TLS connection: it holds a
// handshake turn from the ClientHello read (taken in GetConfigForClient)
// until the server, its flight written, reads the client's answer. After
// the handshake it only passes reads and writes through.
type hsConn struct {
	net.Conn
	sem      chan struct{}
	deadline time.Time
	waited   prometheus.Counter
	took     time.Time // when the turn was taken
	state    uint8     // hsWaiting, hsHolding, hsWrote, hsDone
}

const (
	hsWaiting uint8 = iota // the ClientHello not read yet
	hsHolding              // holding a turn
	hsWrote                // holding, and the server's flight went out
	hsDone                 // turn given back
)

var errNoHandshakeTurn = errors.New("no TLS handshake turn within the handshake timeout")

func (c *hsConn) Read(p []byte) (int, error) {
	if c.state == hsWrote {
		c.release()
	}
	return c.Conn.Read(p)
}

func (c *hsConn) Write(p []byte) (int, error) {
	if c.state == hsHolding {
		c.state = hsWrote
	}
	return c.Conn.Write(p)
}

func (c *hsConn) acquire() bool {
	select {
	case c.sem <- struct{}{}:
		return true
	default:
	}
	c.waited.Inc()
	t := time.NewTimer(time.Until(c.deadline))
	defer t.Stop()
	select {
	case c.sem <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// release gives the turn back, once; called when the handshake ends
// whatever its outcome. The turn stays taken for as long again as it was
// held: handshakes in a row then take at most half of one P per turn, and
// the rest of the box is the calls' (an RSA-2048 storm of 500 connections
// otherwise kept the calls of the connections up waiting 300-700 ms).
func (c *hsConn) release() {
	if c.state == hsHolding || c.state == hsWrote {
		sem := c.sem
		time.AfterFunc(time.Since(c.took), func() { <-sem })
	}
	c.state = hsDone
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
	httpErrUnknownPolicy  = "unknown_policy_keepalive"
)

var httpErrReasons = []string{httpErrBadRequest, httpErrHeaderTooLarge, httpErrNotImplemented, httpErrNotFound,
	httpErrMethod, httpErrTLS, httpErrTimeout, httpErrIncomplete, httpErrUnknownPolicy}
