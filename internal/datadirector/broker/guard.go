package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The guard stands between the embedded broker's listener and kfake, which
// reads a request's 4-byte size and allocates that much before it reads
// anything more: an HTTP request on the Kafka port ("GET " is 1.2 GB), a
// TLS client on a plaintext port or a hostile client would make serve
// claim gigabytes. Like Apache Kafka (socket.request.max.bytes), the guard
// reads the size itself and refuses a request larger than
// MaxRequestBytes before anything is allocated, closing the connection; it
// bounds what all connections' requests may hold at once, and cuts off
// connections that send nothing or stall inside a request. Kafka clients
// see nothing of it: it hands kfake the very bytes they sent.

// Listener limits that are not settings (docs/operations.md names them).
const (
	// FirstRequestTimeout: a connection that sends no request (nor
	// finishes its TLS handshake) within it is closed.
	FirstRequestTimeout = 30 * time.Second
	// IdleTimeout: a connection without a request for this long is closed
	// (Kafka's connections.max.idle.ms); clients reconnect when they need.
	IdleTimeout = 10 * time.Minute
	// StallTimeout: a request begun must go on arriving: no byte of it for
	// this long closes the connection.
	StallTimeout = 30 * time.Second
	// minRequestRate: a request must arrive at least this fast overall
	// (beyond StallTimeout), so that a request trickled a byte at a time
	// holds its memory for a bounded time.
	minRequestRate = 256 << 10 // bytes/s
	// minRequestBytes is the smallest request header (API key, version,
	// correlation id).
	minRequestBytes = 8
)

// timeouts are the guard's: the constants above, shorter in tests.
type timeouts struct{ firstRequest, idle, stall time.Duration }

var defaultTimeouts = timeouts{firstRequest: FirstRequestTimeout, idle: IdleTimeout, stall: StallTimeout}

// Refusal reasons, the values of signalbox_kafka_refused_total{reason}.
const (
	RefusedTooLarge = "too_large" // a request larger than MaxRequestBytes
	RefusedNotKafka = "not_kafka" // HTTP, TLS on a plaintext port, a request shorter than a header
	RefusedSilent   = "silent"    // connected and sent no request within FirstRequestTimeout
	RefusedStalled  = "stalled"   // part of a request, then too slow or nothing
	RefusedMemory   = "memory"    // the requests being read hold all the memory allowed
)

// guard is the shared state of a listener's guarded connections.
type guard struct {
	timeouts
	maxRequest int64 // largest request; also what one client address may hold at once
	inFlight   int64 // what all requests being read may hold at once
	refused    *prometheus.CounterVec
	log        *slog.Logger
	anonymous  Anonymous
	users      *users
	local      localAddrs
	// topicByID names a topic by its id (requests of recent versions name
	// topics so); set once the cluster runs.
	topicByID func([16]byte) string

	mu      sync.Mutex
	held    int64            // bytes held by requests being read, all connections
	byAddr  map[string]int64 // the same, by client address
	waiters int
	freed   chan struct{} // closed (and replaced) when bytes are given back while someone waits

	logMu  sync.Mutex
	logged map[string]time.Time // client address and reason -> last logged
}

func newGuard(maxRequest int32, to timeouts, reg prometheus.Registerer, log *slog.Logger) *guard {
	g := &guard{
		timeouts:   to,
		maxRequest: int64(maxRequest),
		inFlight:   max(2*int64(maxRequest), 256<<20),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_kafka_refused_total",
			Help: "Requests and connections the embedded broker refused, by reason: too_large (a request over -kafka-max-request-bytes), not_kafka (HTTP, TLS on a plaintext listener, a malformed request), silent (no request within 30 s of connecting), stalled (a request that stopped arriving), memory (the requests being read hold all the memory allowed), unauthenticated (a request from another host before SASL), auth_failed (a wrong user, password or mechanism), denied (a request the user's role does not allow)."},
			[]string{"reason"}),
		log:    log,
		byAddr: map[string]int64{},
		freed:  make(chan struct{}),
		logged: map[string]time.Time{},
	}
	for _, r := range []string{RefusedTooLarge, RefusedNotKafka, RefusedSilent, RefusedStalled, RefusedMemory,
		RefusedUnauthenticated, RefusedAuthFailed, RefusedDenied} {
		g.refused.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(g.refused); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				g.refused = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return g
}

// refuse counts a refusal and logs it, once a minute at most per client
// address, reason and user.
func (g *guard) refuse(c net.Conn, reason, detail string) {
	g.refused.WithLabelValues(reason).Inc()
	host := clientHost(c)
	now := time.Now()
	key := host + " " + reason
	if gc, ok := c.(*guardConn); ok && gc.auth.user != nil {
		key += " " + gc.auth.user.Name // once a minute per client, reason and user
	}
	g.logMu.Lock()
	last, seen := g.logged[key]
	if !seen || now.Sub(last) >= time.Minute {
		g.logged[key] = now
		if len(g.logged) > 4096 { // forget the oldest-looking: a scan may come from many addresses
			for k, t := range g.logged {
				if now.Sub(t) >= time.Minute {
					delete(g.logged, k)
				}
			}
		}
		seen = false
	}
	g.logMu.Unlock()
	if !seen {
		g.log.Warn("kafka connection refused", "client", c.RemoteAddr().String(), "reason", reason, "detail", detail,
			"note", "logged once a minute per client and reason; signalbox_kafka_refused_total counts each")
	}
}

// reserve takes n bytes of the in-flight allowance for host, waiting at
// most wait for other requests to give some back.
func (g *guard) reserve(host string, n int64, wait time.Duration) bool {
	var timer *time.Timer
	g.mu.Lock()
	for g.held+n > g.inFlight || g.byAddr[host]+n > g.maxRequest {
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		ch := g.freed
		g.waiters++
		g.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			g.mu.Lock()
			g.waiters--
			g.mu.Unlock()
			return false
		}
		g.mu.Lock()
		g.waiters--
	}
	g.held += n
	g.byAddr[host] += n
	g.mu.Unlock()
	return true
}

// release gives back n bytes host held.
func (g *guard) release(host string, n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.held -= n
	if g.byAddr[host] -= n; g.byAddr[host] <= 0 {
		delete(g.byAddr, host)
	}
	if g.waiters > 0 {
		close(g.freed)
		g.freed = make(chan struct{})
	}
	g.mu.Unlock()
}

// guardListener guards every connection it accepts.
type guardListener struct {
	net.Listener
	g *guard
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardConn{Conn: c, g: l.g, host: clientHost(c), trusted: l.g.trusted(c), patchVersions: -1}
	// Buffered: a request's size, key and version, and small requests
	// whole, in one read of the socket (a large body is read straight
	// into kfake's buffer).
	gc.r = bufio.NewReaderSize(c, 16<<10)
	gc.auth.cond = sync.NewCond(&gc.auth.mu)
	return gc, nil
}

// guardConn is a connection whose requests are read through the guard. Its
// Read is called by one goroutine (kfake's reader); Close may come from
// another.
type guardConn struct {
	net.Conn
	r        *bufio.Reader // the connection's reads
	g        *guard
	host     string
	hdr      [8]byte   // a request's size, and on a trusted connection its API key and version
	hdrLen   int       // bytes of hdr read: 4, or 8 with the key and version
	pending  int       // bytes of hdr not yet handed to the reader
	left     int64     // bytes of the current request's body not yet read
	requests int       // requests begun
	deadline time.Time // by when the current request must have arrived
	held     atomic.Int64
	// trusted: a client on this host (or the broker is open to all), whose
	// bytes go to kfake as they come; the others authenticate (auth).
	trusted bool
	auth    authState
	whole   []byte     // a request read whole, to decide on
	wmu     sync.Mutex // one response written at a time: kfake's or the guard's
	// patchVersions is the version of the ApiVersions request the first
	// response answers (advertiseHandshakeV0), -1 for none.
	patchVersions int16
}

func (c *guardConn) Read(p []byte) (int, error) {
	if !c.trusted {
		return c.readAuthed(p)
	}
	if c.pending == 0 && c.left == 0 {
		if err := c.next(); err != nil {
			return 0, err
		}
		if err := c.peekKey(); err != nil {
			return 0, err
		}
		if !c.trusted { // it authenticates: its requests are read whole from now on
			return c.readAuthed(p)
		}
	}
	if c.pending > 0 {
		n := copy(p, c.hdr[c.hdrLen-c.pending:c.hdrLen])
		c.pending -= n
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	c.armBody()
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left == 0 {
		c.g.release(c.host, c.held.Swap(0))
	}
	if err != nil && isTimeout(err) {
		c.g.refuse(c, RefusedStalled, fmt.Sprintf("a request of %d bytes stopped arriving with %d left", binary.BigEndian.Uint32(c.hdr[:]), c.left+int64(n)))
	}
	return n, err
}

// next reads the size of the next request, checks it and takes its memory
// from the allowance; the size is then handed to the reader as it came.
func (c *guardConn) next() error {
	wait := c.g.idle
	if c.requests == 0 {
		wait = c.g.firstRequest
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.ReadFull(c.r, c.hdr[:1]); err != nil {
		if isTimeout(err) && c.requests == 0 {
			c.g.refuse(c, RefusedSilent, "connected and sent nothing for "+c.g.firstRequest.String())
		}
		return err
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.g.stall))
	if _, err := io.ReadFull(c.r, c.hdr[1:4]); err != nil {
		if isTimeout(err) {
			c.g.refuse(c, RefusedStalled, "sent part of a request size and stopped")
		}
		return err
	}
	c.requests++
	if what := notKafka([4]byte(c.hdr[:4])); what != "" {
		c.g.refuse(c, RefusedNotKafka, what)
		if what == "an HTTP request" {
			c.answerHTTP()
		}
		return errRefused
	}
	size := int64(int32(binary.BigEndian.Uint32(c.hdr[:])))
	switch {
	case size > c.g.maxRequest:
		c.g.refuse(c, RefusedTooLarge, fmt.Sprintf("a request of %d bytes, over the %d of -kafka-max-request-bytes", size, c.g.maxRequest))
		return errRefused
	case size < minRequestBytes:
		c.g.refuse(c, RefusedNotKafka, fmt.Sprintf("a request size of %d bytes", size))
		return errRefused
	}
	if !c.g.reserve(c.host, size, c.g.stall) {
		c.g.refuse(c, RefusedMemory, fmt.Sprintf("a request of %d bytes while the requests being read hold the memory allowed", size))
		return errRefused
	}
	c.held.Store(size)
	// The whole request within the stall timeout plus its size at the
	// minimum rate: a trickle cannot hold its memory for long.
	c.deadline = time.Now().Add(c.g.stall + time.Duration(size)*time.Second/minRequestRate)
	c.left, c.pending, c.hdrLen = size, 4, 4
	return nil
}

// peekKey reads a trusted connection's request's API key and version (its
// first four bytes, handed to the reader after the size): a client on this host that
// authenticates anyway (an NF configured with its credential) is served
// as one from another host, its SASL exchange by the guard and its
// requests by its user's role.
func (c *guardConn) peekKey() error {
	if err := c.readBody(c.hdr[4:8]); err != nil {
		if isTimeout(err) {
			c.g.refuse(c, RefusedStalled, "sent a request size and stopped")
		}
		return err
	}
	c.left -= 4
	c.hdrLen, c.pending = 8, 8
	key, version := int16(binary.BigEndian.Uint16(c.hdr[4:6])), int16(binary.BigEndian.Uint16(c.hdr[6:8]))
	if key == int16(kmsg.ApiVersions) && c.requests == 1 {
		c.patchVersions = version
	}
	if key == int16(kmsg.SASLHandshake) {
		c.trusted = false
		if err := c.readWhole(); err != nil {
			return err
		}
		return c.decide()
	}
	return nil
}

// armBody sets the deadline of the next read of a request's body: no byte
// for the stall timeout, or the whole request not by its deadline, cuts
// it off.
func (c *guardConn) armBody() {
	d := time.Now().Add(c.g.stall)
	if c.deadline.Before(d) {
		d = c.deadline
	}
	_ = c.Conn.SetReadDeadline(d)
}

// readBody reads len(b) bytes of the current request: no byte for the
// stall timeout, or the whole request not by its deadline, cuts it off.
func (c *guardConn) readBody(b []byte) error {
	for read := 0; read < len(b); {
		c.armBody()
		n, err := c.r.Read(b[read:])
		read += n
		if err != nil {
			return err
		}
	}
	return nil
}

// answerHTTP tells an HTTP client (a monitoring probe, a load balancer's
// health check, a URL pointed at the wrong port) what it reached.
func (c *guardConn) answerHTTP() {
	const body = "This is the Kafka listener of signalbox's embedded broker: it speaks the Kafka protocol, not HTTP.\n" +
		"signalbox's API, console, metrics and health are on its -http-addr.\n"
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func (c *guardConn) Close() error {
	c.g.release(c.host, c.held.Swap(0))
	c.auth.mu.Lock()
	c.auth.closed = true
	c.auth.cond.Broadcast()
	c.auth.mu.Unlock()
	return c.Conn.Close()
}

// errRefused ends a connection the guard refused.
var errRefused = errors.New("kafka request refused")

// notKafka names what the first four bytes of a request are when they are
// plainly not a Kafka request's size ("" when they may be).
func notKafka(h [4]byte) string {
	switch string(h[:]) {
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "TRAC":
		return "an HTTP request"
	case "PRI ":
		return "an HTTP/2 connection preface"
	}
	if h[0] == 0x16 && h[1] == 0x03 {
		return "a TLS handshake on a plaintext listener"
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// clientHost is the address a connection comes from, without its port.
func clientHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}
