// Package probe is a third-party consumer of the director's feeds, for tests
// and benchmarks: it receives the synthetic pcap stream (TCP or TLS) or HTTP/2
// JSON copies, validates them, and measures throughput, loss, duplicates
// (from x-signalbox-seq) and end-to-end latency (HDR histogram).
package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Modes.
const (
	ModeSynthetic = "synthetic"
	ModeHTTP2     = "http2"
)

// Config is one probe.
type Config struct {
	Listen   string        // address to listen on, e.g. 127.0.0.1:0
	Mode     string        // "synthetic" (default) or "http2"
	TLSCert  string        // TLS certificate (PEM); with TLSKey, serve TLS (h2 in http2 mode), else plain TCP / h2c
	TLSKey   string        // TLS key (PEM)
	JSONFile string        // write the final report as JSON here
	PCAPFile string        // synthetic mode: also save every record received into this pcap file
	Interval time.Duration // progress line interval (0 = 5s)
	// Window, when set, closes a window of figures (Report.Windows) this
	// often: a soak's latency over time.
	Window   time.Duration
	Duration time.Duration // stop after this long (0 = until ctx done)
	Expect   int64         // stop once this many unique copies arrived (0 = no)
	// IgnoreRun is a run id (the first part of x-signalbox-seq) whose copies
	// are only counted as Warmup: a benchmark's warm-up traffic stays out of
	// the latency, loss and per-NF figures.
	IgnoreRun string
	Logger    *slog.Logger // nil = discard
}

// RegisterFlags registers the probe's flags on fs, writing into c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "address to listen on")
	fs.StringVar(&c.Mode, "mode", c.Mode, "feed type to receive: synthetic or http2")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "TLS certificate file (PEM); enables TLS")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "TLS key file (PEM)")
	fs.StringVar(&c.JSONFile, "json", c.JSONFile, "write the final report as JSON to this file")
	fs.StringVar(&c.PCAPFile, "pcap", c.PCAPFile, "synthetic mode: also save the received stream to this pcap file (open it with Wireshark or tshark)")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "progress line interval (default 5s)")
	fs.DurationVar(&c.Window, "window", c.Window, "report latency and counts per window of this length too (a soak; 0 = off)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "stop after this long (0 = until interrupted)")
	fs.Int64Var(&c.Expect, "expect", c.Expect, "stop once this many unique copies arrived (0 = no limit)")
	fs.StringVar(&c.IgnoreRun, "ignore-run", c.IgnoreRun, "run id (of x-signalbox-seq) counted only as warm-up, outside every other figure")
}

// Probe is a running consumer.
type Probe struct {
	cfg       Config
	log       *slog.Logger
	s         *stats
	tlsc      *tls.Config
	ln        net.Listener
	srv       *http.Server
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	save      *pcapSaver
	pool      sync.Pool          // *nfcopy.Copy for the HTTP/2 handler
	bufs      chan *bytes.Buffer // free list of request buffers; unlike a sync.Pool, GC does not empty it
	closed    chan struct{}      // closed by Close
	closeOnce sync.Once
}

// New checks cfg and prepares a probe; Start listens.
func New(cfg Config) (*Probe, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeSynthetic
	}
	if cfg.Mode != ModeSynthetic && cfg.Mode != ModeHTTP2 {
		return nil, fmt.Errorf("probe: mode %q: want synthetic or http2", cfg.Mode)
	}
	if cfg.Listen == "" {
		return nil, errors.New("probe: listen address required")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("probe: tls-cert and tls-key go together")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Expect < 0 || cfg.Duration < 0 {
		return nil, errors.New("probe: expect and duration must not be negative")
	}
	if cfg.PCAPFile != "" && cfg.Mode != ModeSynthetic {
		return nil, errors.New("probe: -pcap saves a synthetic stream; it needs -mode synthetic")
	}
	p := &Probe{cfg: cfg, log: cfg.Logger, s: newStats(cfg.Expect, cfg.IgnoreRun), conns: map[net.Conn]struct{}{},
		closed: make(chan struct{})}
	if cfg.PCAPFile != "" {
		sv, err := newPCAPSaver(cfg.PCAPFile)
		if err != nil {
			return nil, err
		}
		p.save = sv
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.pool.New = func() any { return new(nfcopy.Copy) }
	p.bufs = make(chan *bytes.Buffer, 32)
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("probe: tls: %w", err)
		}
		p.tlsc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return p, nil
}

// Start listens and serves in the background until ctx ends. A probe can be
// started again after Close, on the same address, keeping its counts — a
// consumer restart, as seen by the sender.
func (p *Probe) Start(ctx context.Context) error {
	addr := p.cfg.Listen
	if p.ln != nil {
		addr = p.ln.Addr().String()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("probe: listen %s: %w", addr, err)
	}
	p.ln = ln
	if p.s.start.IsZero() {
		p.s.start = time.Now()
	}
	if p.cfg.Window > 0 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTicker(p.cfg.Window)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.closed:
					return
				case now := <-t.C:
					p.s.closeWindow(now)
				}
			}
		}()
	}
	if p.cfg.Mode == ModeHTTP2 {
		// The API's limits: headers in 10 s and 64 KiB, idle
		// connections closed after 2 minutes (docs/operations.md).
		p.srv = &http.Server{Handler: http.HandlerFunc(p.serveHTTP), ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)}
		var protos http.Protocols
		protos.SetHTTP1(true)
		if p.tlsc != nil {
			protos.SetHTTP2(true)
			p.srv.TLSConfig = p.tlsc.Clone()
		} else {
			protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge
		}
		p.srv.Protocols = &protos
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var err error
			if p.tlsc != nil {
				err = p.srv.ServeTLS(ln, "", "")
			} else {
				err = p.srv.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.log.Error("probe http2 server", "err", err)
			}
		}()
	} else {
		if p.tlsc != nil {
			p.ln = tls.NewListener(bufferedListener{ln}, p.tlsc)
		}
		p.wg.Add(1)
		go p.acceptLoop()
	}
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	return nil
}

// Addr is the listening address (after Start).
func (p *Probe) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// Done is closed once Expect unique copies have arrived.
func (p *Probe) Done() <-chan struct{} { return p.s.done }

// Snapshot reports what the probe has seen so far.
func (p *Probe) Snapshot() Report { return p.s.report(p.cfg.Mode) }

// Close stops listening, drops connections and waits for the handlers.
func (p *Probe) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	var err error
	if p.srv != nil {
		err = p.srv.Close()
	} else if p.ln != nil {
		err = p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	}
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if p.save != nil { // every connection is done: the file is complete
		if serr := p.save.close(); serr != nil && err == nil {
			err = fmt.Errorf("probe: pcap file %s: %w", p.cfg.PCAPFile, serr)
		}
	}
	return err
}

func (p *Probe) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Error("probe accept", "err", err)
			}
			return
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.s.count(&p.s.conns)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
			}()
			d := newConnDecoder(p.s)
			d.save = p.save
			ra := newReadAhead(c, 4, 64<<10)
			err := d.run(ra)
			ra.Close()
			var se *errStream
			switch {
			case errors.As(err, &se):
				p.s.bad(se.reason, se.detail)
				p.log.Warn("probe dropped connection", "remote", c.RemoteAddr().String(), "err", err)
			case err != nil && !errors.Is(err, net.ErrClosed):
				p.log.Debug("probe connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// maxRequest bounds one HTTP/2 POST.
const maxRequest = 64 << 20

// serveHTTP takes one JSON copy, or many as application/x-ndjson, and answers
// 204. Invalid copies are counted, not refused: a refusal would make an
// at-least-once sender resend the whole batch.
func (p *Probe) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST copies here", http.StatusMethodNotAllowed)
		return
	}
	// Pooled request buffers: at 60k copies/s, growing a fresh buffer per
	// request would cost more than decoding.
	var bp *bytes.Buffer
	select {
	case bp = <-p.bufs:
		bp.Reset()
	default:
		bp = new(bytes.Buffer)
	}
	defer func() {
		select {
		case p.bufs <- bp:
		default:
		}
	}()
	if n := r.ContentLength; n > 0 && n <= maxRequest {
		bp.Grow(int(n) + 1)
	}
	_, err := bp.ReadFrom(io.LimitReader(r.Body, maxRequest+1))
	body := bp.Bytes()
	if err != nil && senderGone(r) {
		// The sender reset the stream or closed the connection mid-body:
		// nothing was delivered, and nobody reads an answer.
		p.s.count(&p.s.aborted)
		return
	}
	if err != nil {
		p.s.bad("read_error", err.Error())
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxRequest {
		p.s.bad("too_large", "request body over 64 MiB")
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	now := time.Now()
	c := p.pool.Get().(*nfcopy.Copy)
	defer p.pool.Put(c)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-ndjson") {
		for len(body) > 0 {
			line := body
			if i := bytes.IndexByte(body, '\n'); i >= 0 {
				line, body = body[:i], body[i+1:]
			} else {
				body = nil
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			p.jsonCopy(c, line, now)
		}
	} else {
		p.jsonCopy(c, body, now)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Probe) jsonCopy(c *nfcopy.Copy, rec []byte, now time.Time) {
	if looksLikeRecord(rec) {
		r, reason, detail := checkRecord(rec)
		if reason != "" {
			p.s.bad(reason, detail)
			return
		}
		p.s.recordSeen(&r, len(rec), now)
		return
	}
	if err := nfcopy.Decode(rec, c); err != nil {
		reason := "syntax"
		var de *nfcopy.DecodeError
		if errors.As(err, &de) {
			reason = de.Reason
		}
		p.s.bad(reason, err.Error())
		return
	}
	p.s.copySeen(c.Header("x-signalbox-seq"), c.NFType, len(rec), len(c.Body), c.Timestamp, now)
}

// Run starts a probe, prints a progress line every Interval, and stops when
// ctx ends, Duration passes or Expect copies arrived; it prints the final
// table and writes JSONFile.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	p, err := New(cfg)
	if err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		return Report{}, err
	}
	fmt.Fprintf(out, "probe: %s on %s\n", p.cfg.Mode, p.Addr())
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	var last Report
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-p.Done():
			break loop
		case <-tick.C:
			if p.save != nil {
				p.save.flush()
			}
			r := p.Snapshot()
			rate := float64(r.Received-last.Received) / p.cfg.Interval.Seconds()
			fmt.Fprintf(out, "probe: received %d (%.0f/s) unique %d dup %d gaps %d invalid %d latency avg %.0fus p99 %dus\n",
				r.Received, rate, r.Unique, r.Duplicates, r.Missing, r.Invalid, r.Latency.Avg, r.Latency.P99)
			last = r
		}
	}
	cancel()
	cerr := p.Close()
	r := p.Snapshot()
	WriteTable(out, r)
	if cfg.JSONFile != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err == nil {
			err = os.WriteFile(cfg.JSONFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			return r, fmt.Errorf("probe: write %s: %w", cfg.JSONFile, err)
		}
	}
	return r, cerr
}

// WriteTable prints a report as a table.
func WriteTable(out io.Writer, r Report) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	fmt.Fprintf(w, "probe report (%s, %.1fs)\n", r.Mode, r.Elapsed)
	row := func(k string, v any) { fmt.Fprintf(w, "  %-14s %v\n", k, v) }
	row("received", r.Received)
	row("bytes", r.Bytes)
	row("body bytes", r.Body)
	row("rate/s", fmt.Sprintf("%.0f", r.Rate))
	row("unique", r.Unique)
	row("duplicates", r.Duplicates)
	row("missing", r.Missing)
	row("no seq", r.NoSeq)
	row("invalid", r.Invalid)
	for _, k := range sortedKeys(r.InvalidReasons) {
		row("  "+k, r.InvalidReasons[k])
	}
	for _, e := range r.FirstErrors {
		fmt.Fprintf(w, "    e.g. %s\n", e)
	}
	for _, k := range sortedKeys(r.PerNF) {
		row("nf "+k, r.PerNF[k])
	}
	for _, k := range sortedKeys(r.Records) {
		row("xdr "+k, r.Records[k])
	}
	l := r.Latency
	fmt.Fprintf(w, "  latency (us)   n=%d avg=%.0f p50=%d p90=%d p95=%d p99=%d p99.9=%d max=%d\n",
		l.Count, l.Avg, l.P50, l.P90, l.P95, l.P99, l.P999, l.Max)
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// senderGone reports whether r's stream ended on the sender's side (reset,
// or its connection closed). The HTTP/2 server fails the body read a moment
// before it cancels the request's context, so this waits briefly for it.
func senderGone(r *http.Request) bool {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return true
	case <-t.C:
		return false
	}
}

// bufferedListener's connections read the socket in large chunks: crypto/tls
// reads every record (16 KiB at most) with its own Read, and a read syscall
// per record is a large part of a probe's CPU.
type bufferedListener struct{ net.Listener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 256<<10)}, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
