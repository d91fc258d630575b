// Package http2sink delivers NF message copies to a third-party consumer as
// HTTP/2 JSON: each copy's record, exactly as received (the reference feed
// format), is POSTed to the consumer URL with Content-Type application/json,
// over h2 (https://) or h2c (http://, prior knowledge), many concurrent
// streams sharing one connection.
package http2sink

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/health"
)

// Config configures a Sink.
type Config struct {
	URL string      // http://host:port/path (h2c) or https://… (h2)
	TLS *tls.Config // for https; nil = system roots. Must be nil for http.
	// Concurrency bounds requests in flight (streams). Default 256.
	Concurrency int
	// Timeout bounds one request, from send to the end of the answer.
	// Default 10s.
	Timeout time.Duration
	// MaxRetries is how often one copy is re-posted within a Send after a
	// retryable failure (connection error, timeout, 408, 429, 5xx).
	// 0 means the default, 3; a negative value disables retries.
	MaxRetries int
	BackoffMin time.Duration // first retry delay; default 50ms
	BackoffMax time.Duration // cap of the exponential backoff; default 2s
	// FireAndForget: Send returns once every request has been written to
	// the connection, without waiting for the answers (see Sink).
	FireAndForget bool
	Logger        *slog.Logger // default slog.Default()
}

// Sink posts copies to one consumer URL.
//
// Guarantees. Normally Send returns nil only once every copy of the batch
// was answered 2xx: at-least-once delivery (a copy can arrive twice when an
// answer is lost and the copy is re-posted). With FireAndForget, Send returns
// nil once every request was written to the connection; the answers are read
// in the background and only counted (LastError), never retried, so a
// consumer that fails or drops a request loses that copy: at-most-once past
// the write. A request that cannot even be written still fails Send. At most
// Concurrency requests are outstanding in either mode, so when answers lag a
// fire-and-forget Send blocks until slots free up (or Timeout ends them).
type Sink struct {
	cfg       Config
	url       string
	log       *slog.Logger
	transport *http.Transport
	client    *http.Client

	// Requests run on long-lived workers, at most Concurrency of them,
	// started as the load needs them: a goroutine per copy would grow its
	// stack through the HTTP/2 client and TLS every time; a worker keeps its
	// grown stack.
	work    chan func()
	stop    chan struct{}
	wmu     sync.Mutex
	workers int
	wg      sync.WaitGroup // the workers

	// Background (fire-and-forget) requests live until Close.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	bufs     sync.Pool // *[]byte, copies of Raw for fire-and-forget

	health.State // Connected, Retries, LastError
	closed       atomic.Bool

	rmu      sync.Mutex
	rejected []*nfcopy.Copy // answered 413 in a batch Send delivered, until Rejected
	reasons  []string
	acked    map[*nfcopy.Copy]struct{} // answered 2xx in a batch that failed: not sent again
}

// StatusError is a non-2xx answer from the consumer.
type StatusError struct {
	Code int
	Body string // the start of the answer body, for diagnosis
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return "consumer answered " + strconv.Itoa(e.Code) + " " + http.StatusText(e.Code)
	}
	return fmt.Sprintf("consumer answered %d %s: %q", e.Code, http.StatusText(e.Code), e.Body)
}

// Retryable reports whether posting again may succeed: 408, 429 and 5xx. Any
// other 4xx means the consumer rejects the copy itself.
func (e *StatusError) Retryable() bool {
	return e.Code == http.StatusRequestTimeout || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// New validates cfg and returns a Sink. Connections are made lazily.
func New(cfg Config) (*Sink, error) {
	if cfg.URL == "" {
		return nil, errors.New("http2sink: url: required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("http2sink: url %q: %w", cfg.URL, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("http2sink: url %q: no host", cfg.URL)
	}
	protocols := new(http.Protocols)
	switch u.Scheme {
	case "https":
		protocols.SetHTTP2(true)
	case "http":
		if cfg.TLS != nil {
			return nil, fmt.Errorf("http2sink: url %q: TLS configured but the scheme is http (use https)", cfg.URL)
		}
		protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	default:
		return nil, fmt.Errorf("http2sink: url %q: scheme must be http (h2c) or https (h2)", cfg.URL)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = 3
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 50 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 2 * time.Second
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("http2sink: backoff max %v below backoff min %v", cfg.BackoffMax, cfg.BackoffMin)
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil {
		tlsCfg = cfg.TLS.Clone()
	}
	t := &http.Transport{
		Proxy:               nil, // a feed goes straight to its consumer
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		Protocols:           protocols,
		HTTP2: &http.HTTP2Config{
			// Notice a dead consumer even while no answers are due.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
		},
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Sink{
		cfg:       cfg,
		url:       u.String(),
		log:       log.With("sink", "http2", "url", u.Redacted()),
		transport: t,
		client:    &http.Client{Transport: t},
		work:      make(chan func()),
		stop:      make(chan struct{}),
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s, nil
}

var errClosed = errors.New("http2sink: sink closed")

// Send posts every copy of batch concurrently (up to Concurrency in flight)
// and returns nil once all were answered 2xx, or, with FireAndForget, once
// all were written. Otherwise it returns an error and the caller sends the
// batch again. Send does not retain batch or the copies' Raw buffers.
func (s *Sink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	if s.closed.Load() {
		return errClosed
	}
	if s.cfg.FireAndForget {
		return s.sendNoWait(ctx, batch)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		failed   int
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		failed++
		mu.Unlock()
		cancel() // the whole batch is sent again anyway
	}
	var rejected, delivered []*nfcopy.Copy
	var reasons []string
	s.rmu.Lock()
	acked := s.acked
	s.acked = nil
	s.rmu.Unlock()
	for _, c := range batch {
		if _, ok := acked[c]; ok {
			continue // answered 2xx before its batch failed
		}
		raw := c.Raw
		wg.Add(1)
		if !s.submit(ctx, func() {
			defer wg.Done()
			err := s.deliver(ctx, raw)
			var se *StatusError
			if errors.As(err, &se) && se.Code == http.StatusRequestEntityTooLarge {
				// The consumer will never take it: set it aside, not the batch.
				mu.Lock()
				rejected, reasons = append(rejected, c), append(reasons, fmt.Sprintf("record of %d bytes refused by %s: %v", len(raw), s.url, err))
				mu.Unlock()
				return
			}
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			delivered = append(delivered, c)
			mu.Unlock()
		}) {
			wg.Done()
			break
		}
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		// The feed sends the batch again: what was answered 2xx (or 413)
		// is not sent twice.
		s.rmu.Lock()
		s.acked = acked
		if s.acked == nil {
			s.acked = make(map[*nfcopy.Copy]struct{}, len(delivered)+len(rejected))
		}
		for _, c := range delivered {
			s.acked[c] = struct{}{}
		}
		s.rmu.Unlock()
		rejected = nil
		return fmt.Errorf("http2sink: batch of %d not delivered to %s: %w", len(batch), s.url, firstErr)
	}
	if len(rejected) > 0 {
		s.rmu.Lock()
		s.rejected, s.reasons = append(s.rejected, rejected...), append(s.reasons, reasons...)
		s.rmu.Unlock()
	}
	return nil
}

// Rejected returns, and forgets, the copies of delivered batches that the
// consumer refused with 413 Content Too Large (director.RejectingSink).
func (s *Sink) Rejected() ([]*nfcopy.Copy, []string) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	cs, rs := s.rejected, s.reasons
	s.rejected, s.reasons = nil, nil
	return cs, rs
}

// submit runs f on a worker: an idle one, a new one while there are fewer
// than Concurrency, or the first to become idle. It returns false, without
// running f, when ctx ends or the sink is closed first. A worker is busy
// until f returns, so at most Concurrency requests are in flight.
func (s *Sink) submit(ctx context.Context, f func()) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case s.work <- f:
		return true
	default:
	}
	s.wmu.Lock()
	if s.workers < s.cfg.Concurrency {
		s.workers++
		s.wg.Add(1)
		s.wmu.Unlock()
		go s.worker(f)
		return true
	}
	s.wmu.Unlock()
	select {
	case s.work <- f:
		return true
	case <-ctx.Done():
	case <-s.stop:
	}
	return false
}

// worker runs first, then whatever submit hands it, until Close.
func (s *Sink) worker(first func()) {
	defer s.wg.Done()
	first()
	for {
		select {
		case f := <-s.work:
			f()
		case <-s.stop:
			return
		}
	}
}

// deliver posts one record, retrying retryable failures with backoff.
func (s *Sink) deliver(ctx context.Context, raw []byte) error {
	for attempt := 0; ; attempt++ {
		err := s.post(ctx, raw)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		s.SetErr(err)
		var se *StatusError
		if errors.As(err, &se) && !se.Retryable() {
			return err
		}
		if attempt >= s.cfg.MaxRetries {
			return fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		s.Retried()
		t := time.NewTimer(s.backoff(attempt + 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (s *Sink) post(ctx context.Context, raw []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		s.SetConnected(false)
		return err
	}
	s.SetConnected(true)
	return finish(resp)
}

// finish drains and closes an answer (so its stream is released cleanly) and
// turns a non-2xx status into a *StatusError.
func finish(resp *http.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	var snippet [256]byte
	n, _ := io.ReadFull(resp.Body, snippet[:])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(snippet[:n]))}
}

// sendNoWait starts every request and waits only until each was written.
// Raw is copied: the caller reuses it once Send returns, while the request
// lives on (and the transport may replay the body on a fresh connection).
func (s *Sink) sendNoWait(ctx context.Context, batch []*nfcopy.Copy) error {
	wrote := make(chan error, len(batch))
	started := 0
	for _, c := range batch {
		bp, _ := s.bufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		*bp = append((*bp)[:0], c.Raw...)
		s.bg.Add(1)
		if !s.submit(ctx, func() { s.postNoWait(bp, wrote) }) {
			s.bg.Done()
			s.bufs.Put(bp)
			break
		}
		started++
	}
	var firstErr error
	for i := 0; i < started; i++ {
		select {
		case err := <-wrote:
			if err != nil && firstErr == nil {
				firstErr = err
			}
		case <-ctx.Done():
			// The requests carry on in the background; the batch counts
			// as not delivered and is sent again.
			return fmt.Errorf("http2sink: batch of %d to %s: %w", len(batch), s.url, ctx.Err())
		}
	}
	if firstErr == nil && started < len(batch) {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return fmt.Errorf("http2sink: batch of %d not written to %s: %w", len(batch), s.url, firstErr)
	}
	return nil
}

// postNoWait posts one record, reports on wrote once it is written (or has
// failed), then reads the answer for connection health and statistics.
func (s *Sink) postNoWait(bp *[]byte, wrote chan<- error) {
	defer s.bg.Done()
	var once sync.Once
	report := func(err error) { once.Do(func() { wrote <- err }) }
	defer report(errors.New("request ended before it was written"))

	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.Timeout)
	defer cancel()
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) { report(info.Err) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, s.url, bytes.NewReader(*bp))
	if err != nil {
		report(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		s.SetConnected(false)
		report(err)
		s.SetErr(err)
		s.bufs.Put(bp)
		return
	}
	s.SetConnected(true)
	report(nil)
	if err := finish(resp); err != nil {
		s.SetErr(err)
	}
	// Only now is the body surely no longer read by the transport.
	s.bufs.Put(bp)
}

// backoff is exponential from BackoffMin, capped at BackoffMax, with jitter
// over its upper half.
func (s *Sink) backoff(n int) time.Duration {
	d := s.cfg.BackoffMin
	for i := 1; i < n && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// Close cancels background (fire-and-forget) requests, waits for them and
// closes idle connections. Send is not called after Close.
func (s *Sink) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.bgCancel()
	close(s.stop)
	s.wg.Wait()
	s.bg.Wait()
	s.transport.CloseIdleConnections()
	s.SetConnected(false)
	return nil
}
