package synthetic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/health"
)

// Config configures a Sink.
type Config struct {
	Endpoint     string      // host:port of the consumer
	TLS          *tls.Config // nil = plain TCP
	Mappings     []Mapping
	MSS          int           // EncoderOptions.MSS
	MaxFlows     int           // EncoderOptions.MaxFlows
	KeepPorts    bool          // EncoderOptions.KeepPorts
	NoHandshake  bool          // EncoderOptions.NoHandshake
	DialTimeout  time.Duration // default 5s
	WriteTimeout time.Duration // per batch write; default 10s
	BackoffMin   time.Duration // first reconnect delay; default 100ms
	BackoffMax   time.Duration // cap of the exponential backoff; default 10s
	Logger       *slog.Logger  // default slog.Default()
}

func (c *Config) encoderOptions() EncoderOptions {
	return EncoderOptions{Mappings: c.Mappings, MSS: c.MSS, MaxFlows: c.MaxFlows, KeepPorts: c.KeepPorts, NoHandshake: c.NoHandshake}
}

// Sink streams copies as synthetic pcap to one TCP or TLS consumer.
//
// Guarantee: Send returns nil once the consumer's TCP stack has acknowledged
// every byte of the batch (Linux; elsewhere once it is written). Write and
// Confirmed split the two, so that a caller can write the next batch while
// the previous one awaits its acknowledgement. The stream is write-only: a
// reader goroutine only notices the peer's close, so that the next write
// reconnects instead of writing into a dead socket.
type Sink struct {
	cfg    Config
	log    *slog.Logger
	dialer net.Dialer

	mu      sync.Mutex // serialises Send, Connect and Close
	enc     *Encoder
	fresh   bool          // conn has had nothing written yet: the pcap header first
	evicted atomic.Uint64 // enc.Evicted(), for FlowsEvicted
	// respFirst is enc.ResponsesFirst(), for ResponsesFirst.
	respFirst atomic.Uint64
	buf       []byte
	conn      net.Conn
	raw       syscall.RawConn // the TCP socket under conn, for acknowledgement tracking
	gather    *gather         // under conn: counts what reaches the socket; gathers a TLS batch's records

	// Acknowledgement tracking. A ticket is a position in the stream of
	// bytes written to all connections so far; the current connection's
	// bytes start after connBase.
	connBase    uint64
	acked       uint64        // acknowledged on the current connection (>= connBase)
	ackedBefore uint64        // acknowledged on earlier connections
	out         []sentMark    // written batches not yet acknowledged, oldest first
	dead        chan struct{} // closed when the connection's reader sees EOF/error
	failures    int           // consecutive failures, drives the backoff
	nextDial    time.Time
	attempts    uint64
	closed      bool

	health.State // Connected, Retries, LastError
}

// maxKeptBuf bounds the batch buffer kept between Sends; one exceptional
// batch must not pin its memory forever.
const maxKeptBuf = 32 << 20

// New validates cfg and returns a Sink; it connects lazily on the first Send.
func New(cfg Config) (*Sink, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("synthetic: endpoint: required (host:port)")
	}
	host, port, err := net.SplitHostPort(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("synthetic: endpoint %q: %w", cfg.Endpoint, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return nil, fmt.Errorf("synthetic: endpoint %q: invalid port %q", cfg.Endpoint, port)
	}
	for i, m := range cfg.Mappings {
		if !m.Addr.Addr().IsValid() {
			return nil, fmt.Errorf("synthetic: mappings[%d]: invalid address", i)
		}
		if m.NFFQDN == "" && m.NFInstanceID == "" {
			return nil, fmt.Errorf("synthetic: mappings[%d]: needs an NF FQDN or NF instance id", i)
		}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 10 * time.Second
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("synthetic: backoff max %v below backoff min %v", cfg.BackoffMax, cfg.BackoffMin)
	}
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
		if cfg.TLS.ServerName == "" && !cfg.TLS.InsecureSkipVerify {
			cfg.TLS.ServerName = host
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sink{
		cfg:    cfg,
		log:    log.With("sink", "synthetic", "endpoint", cfg.Endpoint),
		dialer: net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second},
		enc:    NewEncoder(cfg.encoderOptions()),
	}, nil
}

var errClosed = errors.New("synthetic: sink closed")

// Connect connects to the consumer now unless the sink is connected,
// waiting out its reconnect backoff first: a feed calls it as it starts, so
// that an endpoint it cannot reach shows in its state and last error at
// once, not at its first copy. The pcap header goes with the first copy.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.conn != nil {
		return nil
	}
	return s.connect(ctx)
}

// FlowsEvicted is how many flows the sink closed to make room in its flow
// table (Config.MaxFlows) for another, since it was made.
func (s *Sink) FlowsEvicted() uint64 { return s.evicted.Load() }

// ResponsesFirst is how many responses (and Diameter answers) the sink wrote
// before their request, since it was made (Encoder.ResponsesFirst).
func (s *Sink) ResponsesFirst() uint64 { return s.respFirst.Load() }

// Send encodes the whole batch into one buffer and writes it with one Write
// call, connecting first if needed (on a new connection the pcap global
// header is written again and flows restart). On failure the connection is
// closed and the error returned; the caller sends the batch again. Send does
// not retain batch.
func (s *Sink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.write(ctx, batch, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.awaitAck(ctx, t, deadline); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return s.fail(fmt.Errorf("synthetic: write to %s: %w", s.cfg.Endpoint, err))
	}
	return nil
}

// Write is Send without the wait for the consumer's acknowledgement: it
// returns once the batch is written, with a ticket for Confirmed, so that the
// caller can encode and write the next batch meanwhile. Tickets grow with
// every byte written, so confirming one confirms every earlier one.
func (s *Sink) Write(ctx context.Context, batch []*nfcopy.Copy) (uint64, error) {
	return s.WriteShared(ctx, batch, nil)
}

// WriteShared is Write for a batch whose copies sh (nil: none) holds shared
// encodings of (Shared.Encode); the bytes written are the same as Write's.
func (s *Sink) WriteShared(ctx context.Context, batch []*nfcopy.Copy, sh *Shared) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(ctx, batch, sh)
}

// Confirmed reports whether the consumer's TCP stack acknowledged every byte
// up to ticket t. An error means it never will: the connection is gone (or
// the consumer acknowledged nothing within the write timeout), so the
// batches written since the last confirmed one must be written again.
func (s *Sink) Confirmed(t uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if done, err := s.settled(t); done || err != nil {
		return done, err
	}
	if err := s.updateAcked(); err != nil {
		return false, s.fail(fmt.Errorf("synthetic: %s: %w", s.cfg.Endpoint, err))
	}
	if t <= s.acked {
		return true, nil
	}
	if len(s.out) > 0 && time.Since(s.out[0].at) > s.cfg.WriteTimeout {
		return false, s.fail(fmt.Errorf("synthetic: %s: consumer has not acknowledged a batch within the write timeout", s.cfg.Endpoint))
	}
	return false, nil
}

var errLost = errors.New("connection lost before the consumer acknowledged the batch")

// settled tells, without asking the kernel, whether ticket t is confirmed
// (true) or can never be (errLost). s.mu is held.
func (s *Sink) settled(t uint64) (bool, error) {
	switch {
	case t <= s.ackedBefore:
		return true, nil
	case t <= s.connBase, s.conn == nil:
		return false, fmt.Errorf("synthetic: %s: %w", s.cfg.Endpoint, errLost)
	case t <= s.acked:
		return true, nil
	}
	return false, nil
}

// fail records err, drops the connection and returns err. s.mu is held.
func (s *Sink) fail(err error) error {
	s.recordFailure(err)
	s.dropConn()
	return err
}

// write encodes and writes batch, connecting first if needed; it returns the
// ticket of the batch's last byte. s.mu is held.
func (s *Sink) write(ctx context.Context, batch []*nfcopy.Copy, sh *Shared) (uint64, error) {
	if s.closed {
		return 0, errClosed
	}
	if s.conn != nil {
		select {
		case <-s.dead:
			s.dropConn()
			// Counted as a failure so that a consumer that accepts and
			// drops connections is redialled with backoff, not in a loop.
			s.recordFailure(errors.New("connection closed by the consumer"))
			if s.failures == 1 {
				s.log.Warn("synthetic sink connection closed by the consumer; reconnecting")
			}
		default:
		}
	}
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return 0, err
		}
	}
	b := s.buf[:0]
	if s.fresh { // a new connection: the pcap header, and flows start again
		s.enc.Reset()
		b = s.enc.AppendHeader(b)
		s.fresh = false
	}
	for _, c := range batch {
		b = s.enc.AppendCopyFrom(b, c, sh)
	}
	s.evicted.Store(s.enc.Evicted())
	s.respFirst.Store(s.enc.ResponsesFirst())
	if cap(b) <= maxKeptBuf {
		s.buf = b
	} else {
		s.buf = nil
	}
	if len(b) == 0 {
		return s.connBase + s.gather.written(), nil
	}
	deadline := time.Now().Add(s.cfg.WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn := s.conn
	_ = conn.SetWriteDeadline(deadline)
	// A cancelled ctx interrupts a write blocked on a slow consumer.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Unix(1, 0)) })
	g := s.gather
	g.hold()
	_, err := conn.Write(b)
	if err == nil {
		err = g.flush()
	} else {
		g.discard()
	}
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return 0, s.fail(fmt.Errorf("synthetic: write %d bytes to %s: %w", len(b), s.cfg.Endpoint, err))
	}
	s.failures = 0
	t := s.connBase + g.written()
	if s.raw == nil {
		s.acked = t // the platform cannot tell; the write is all we know
	} else {
		s.out = append(s.out, sentMark{end: t, at: time.Now()})
	}
	return t, nil
}

// sentMark is a written batch awaiting the consumer's acknowledgement.
type sentMark struct {
	end uint64
	at  time.Time
}

// updateAcked advances s.acked to what the consumer's TCP stack has
// acknowledged on the current connection. s.mu is held, s.conn is set.
func (s *Sink) updateAcked() error {
	select {
	case <-s.dead:
		return errors.New("connection closed by the consumer before it acknowledged the batch")
	default:
	}
	unacked, ok := unackedBytes(s.raw)
	if !ok {
		s.acked = s.connBase + s.gather.written()
		s.out = s.out[:0]
		return nil
	}
	a := s.connBase + s.gather.written() - uint64(unacked)
	if a <= s.acked {
		return nil // nothing new: one syscall for the polls that wait
	}
	// The queue shrank: acknowledged, unless a reset emptied it.
	if !connAlive(s.raw) {
		return errors.New("connection reset by the consumer before it acknowledged the batch")
	}
	s.acked = a
	n := 0
	for n < len(s.out) && s.out[n].end <= s.acked {
		n++
	}
	s.out = append(s.out[:0], s.out[n:]...)
	return nil
}

// awaitAck waits until the consumer's TCP stack has acknowledged every byte
// up to ticket t, so that a batch written into a connection the consumer is
// dropping is reported as failed (and sent again) instead of silently lost.
// On loopback this takes microseconds to a consumer's read; over a WAN, one
// round trip per batch (the feed's batches grow with the rate, so
// throughput follows). s.mu is held.
func (s *Sink) awaitAck(ctx context.Context, t uint64, deadline time.Time) error {
	wait := 10 * time.Microsecond
	for {
		if done, err := s.settled(t); done || err != nil {
			return err
		}
		if err := s.updateAcked(); err != nil {
			return err
		}
		if t <= s.acked {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer has not acknowledged %d bytes within the write timeout", t-s.acked)
		}
		time.Sleep(wait)
		// On loopback the last segment's ACK usually comes when the
		// consumer reads it, a few hundred µs; a coarse backoff would
		// hold the feed's next batch for up to twice that.
		wait = min(wait*2, 200*time.Microsecond)
	}
}

// connect waits out any backoff, then dials. Called with s.mu held.
func (s *Sink) connect(ctx context.Context) error {
	if wait := time.Until(s.nextDial); s.failures > 0 && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("synthetic: waiting to reconnect to %s: %w", s.cfg.Endpoint, ctx.Err())
		case <-t.C:
		}
	}
	s.attempts++
	if s.attempts > 1 {
		s.Retried()
	}
	var conn net.Conn
	var raw syscall.RawConn
	var g *gather
	tcp, err := s.dialer.DialContext(ctx, "tcp", s.cfg.Endpoint)
	if err == nil {
		if tc, ok := tcp.(*net.TCPConn); ok {
			raw, _ = tc.SyscallConn()
		}
		g = &gather{Conn: tcp}
		conn = g
		if s.cfg.TLS != nil {
			tcfg := s.cfg.TLS
			if tcfg.ServerName == "" && !tcfg.InsecureSkipVerify {
				tcfg = tcfg.Clone()
				tcfg.ServerName, _, _ = net.SplitHostPort(s.cfg.Endpoint)
			}
			tlc := tls.Client(g, tcfg)
			if err = tlc.HandshakeContext(ctx); err != nil {
				tcp.Close()
				err = fmt.Errorf("tls handshake: %w", err)
			}
			conn = tlc
		}
	}
	if err != nil {
		err = fmt.Errorf("synthetic: connect %s: %w", s.cfg.Endpoint, err)
		s.recordFailure(err)
		s.log.Warn("synthetic sink connect failed", "error", err, "retry_in", time.Until(s.nextDial).Round(time.Millisecond))
		return err
	}
	dead := make(chan struct{})
	// The consumer never sends; reading only detects its close early.
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		// Safe: a new connection is only made after dropConn has
		// waited for dead.
		s.SetConnected(false)
		close(dead)
	}()
	s.conn, s.raw, s.dead, s.gather = conn, raw, dead, g
	s.fresh = true
	s.SetConnected(true)
	s.log.Info("synthetic sink connected", "tls", s.cfg.TLS != nil)
	return nil
}

func (s *Sink) recordFailure(err error) {
	s.failures++
	s.nextDial = time.Now().Add(s.backoff(s.failures))
	s.SetErr(err)
}

// backoff is exponential from BackoffMin, capped at BackoffMax, with jitter
// over its upper half so that many sinks do not reconnect in step.
func (s *Sink) backoff(n int) time.Duration {
	d := s.cfg.BackoffMin
	for i := 1; i < n && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// dropConn closes the connection and waits for its reader. Called with s.mu held.
func (s *Sink) dropConn() {
	if s.conn == nil {
		return
	}
	_ = s.conn.Close()
	<-s.dead
	// Tickets continue across connections: what this one did not confirm
	// can never be confirmed now.
	s.ackedBefore = max(s.ackedBefore, s.acked)
	s.connBase += s.gather.written()
	s.acked = s.connBase
	s.out = s.out[:0]
	s.conn, s.raw, s.dead, s.gather = nil, nil, nil, nil
	s.SetConnected(false)
}

// Close closes the connection; Send fails afterwards.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.dropConn()
	return nil
}

// gather sits between a TLS connection and its TCP socket. crypto/tls writes
// every record (at most 16 KB of plaintext) with its own Write; while held,
// gather collects them so that a batch reaches the kernel in one write call
// (and the consumer in large segments) instead of hundreds of small ones.
type gather struct {
	net.Conn
	mu  sync.Mutex // also held across flush's write, so records stay in order
	on  bool
	buf []byte
	n   uint64 // bytes written to the socket
}

func (g *gather) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.on {
		g.buf = append(g.buf, p...)
		return len(p), nil
	}
	n, err := g.Conn.Write(p)
	g.n += uint64(n)
	return n, err
}

// written is how many bytes reached the socket.
func (g *gather) written() uint64 {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (g *gather) hold() {
	g.mu.Lock()
	g.on = true
	g.mu.Unlock()
}

// flush writes what was gathered and stops gathering.
func (g *gather) flush() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = false
	n, err := g.Conn.Write(g.buf)
	g.n += uint64(n)
	g.reset()
	return err
}

// discard stops gathering and drops what was gathered (the connection is
// being abandoned).
func (g *gather) discard() {
	g.mu.Lock()
	g.on = false
	g.reset()
	g.mu.Unlock()
}

func (g *gather) reset() {
	if cap(g.buf) > maxKeptBuf {
		g.buf = nil
	} else {
		g.buf = g.buf[:0]
	}
}
