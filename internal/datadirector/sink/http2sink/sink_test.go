package http2sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// consumer is a test probe recording what it receives.
type consumer struct {
	mu       sync.Mutex
	bodies   map[string]int // body -> times received
	attempts map[string]int
	remotes  map[string]bool
	bad      []string

	inFlight, maxInFlight atomic.Int32
	// answer decides the status for a body's nth attempt (1-based).
	answer func(body string, attempt int) int
	delay  time.Duration
	block  chan struct{} // if set, handlers wait on it before answering
}

func newConsumer() *consumer {
	return &consumer{bodies: map[string]int{}, attempts: map[string]int{}, remotes: map[string]bool{},
		answer: func(string, int) int { return http.StatusOK }}
}

func (c *consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	body, err := io.ReadAll(r.Body)
	c.mu.Lock()
	if err != nil || r.ProtoMajor != 2 || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		c.bad = append(c.bad, fmt.Sprintf("%s %s %s err=%v", r.Proto, r.Method, r.Header.Get("Content-Type"), err))
	}
	c.attempts[string(body)]++
	attempt := c.attempts[string(body)]
	c.remotes[r.RemoteAddr] = true
	c.mu.Unlock()
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	if c.block != nil {
		<-c.block
	}
	code := c.answer(string(body), attempt)
	if code/100 == 2 {
		c.mu.Lock()
		c.bodies[string(body)]++
		c.mu.Unlock()
	}
	w.WriteHeader(code)
}

func (c *consumer) check(t *testing.T, batch []*nfcopy.Copy) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bad) > 0 {
		t.Errorf("bad requests: %v", c.bad[:min(3, len(c.bad))])
	}
	for i, cp := range batch {
		if c.bodies[string(cp.Raw)] != 1 {
			t.Errorf("copy %d delivered %d times", i, c.bodies[string(cp.Raw)])
		}
	}
}

// startH2C serves h2c (prior knowledge) only: an HTTP/1 request would fail.
func startH2C(t testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p, HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: 16 << 20, MaxConcurrentStreams: 1000}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/callproducer"
}

// startH2 serves h2 over TLS; it returns the URL and a client TLS config.
func startH2(t testing.TB, h http.Handler) (string, *tls.Config) {
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv.URL + "/callproducer", &tls.Config{RootCAs: pool}
}

func makeBatch(n, size int, tag string) []*nfcopy.Copy {
	batch := make([]*nfcopy.Copy, n)
	for i := range batch {
		raw := fmt.Sprintf(`{"version":"1.0.0","metadata-list":{"correlation-id":"%s-%d"},"5g-sbi-message":"`, tag, i)
		raw += strings.Repeat("x", max(0, size-len(raw)-2)) + `"}`
		batch[i] = &nfcopy.Copy{CorrelationID: fmt.Sprintf("%s-%d", tag, i), Raw: []byte(raw)}
	}
	return batch
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		answer       func(body string, attempt int) int
		maxRetries   int
		wantErr      string // "" = delivered
		wantAttempts int    // per copy
		wantCode     int    // StatusError code expected in the error
	}{
		{"503 then ok", func(_ string, n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		}, 3, "", 3, 0},
		{"429 then ok", func(_ string, n int) int {
			if n == 1 {
				return http.StatusTooManyRequests
			}
			return http.StatusOK
		}, 3, "", 2, 0},
		{"408 then ok", func(_ string, n int) int {
			if n == 1 {
				return http.StatusRequestTimeout
			}
			return http.StatusAccepted
		}, 3, "", 2, 0},
		{"503 forever", func(string, int) int { return http.StatusServiceUnavailable }, 2, "after 3 attempts", 3, 503},
		{"400 not retried", func(string, int) int { return http.StatusBadRequest }, 3, "400 Bad Request", 1, 400},
		{"404 not retried", func(string, int) int { return http.StatusNotFound }, 3, "404", 1, 404},
		{"no retries", func(string, int) int { return http.StatusBadGateway }, -1, "after 1 attempts", 1, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConsumer()
			c.answer = tt.answer
			s, err := New(Config{URL: startH2C(t, c), MaxRetries: tt.maxRetries, BackoffMin: time.Millisecond,
				BackoffMax: 5 * time.Millisecond, Logger: testkit.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			batch := makeBatch(1, 100, "retry")
			err = s.Send(context.Background(), batch)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, batch)
				if s.Retries() != uint64(tt.wantAttempts-1) {
					t.Errorf("Retries() = %d", s.Retries())
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Send: %v, want %q", err, tt.wantErr)
				}
				var se *StatusError
				if !errors.As(err, &se) || se.Code != tt.wantCode {
					t.Fatalf("error %v does not carry status %d", err, tt.wantCode)
				}
				if s.LastError() == "" {
					t.Error("LastError empty")
				}
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if got := c.attempts[string(batch[0].Raw)]; got != tt.wantAttempts {
				t.Errorf("%d attempts, want %d", got, tt.wantAttempts)
			}
		})
	}
}

func TestConcurrencyBound(t *testing.T) {
	c := newConsumer()
	c.delay = 20 * time.Millisecond
	s, err := New(Config{URL: startH2C(t, c), Concurrency: 8, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := makeBatch(64, 500, "conc")
	start := time.Now()
	if err := s.Send(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	c.check(t, batch)
	if m := c.maxInFlight.Load(); m > 8 || m < 4 {
		t.Errorf("max in flight %d, want 4..8", m)
	}
	// 64 requests of 20ms, 8 at a time: about 160ms; serial would be 1.3s.
	if d := time.Since(start); d > time.Second {
		t.Errorf("batch took %v: requests not concurrent", d)
	}
	// The same workers carry the next batches: no more than Concurrency
	// were ever started, and Close ends them.
	for i := range 3 {
		if err := s.Send(context.Background(), makeBatch(16, 500, fmt.Sprintf("again%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	s.wmu.Lock()
	workers := s.workers
	s.wmu.Unlock()
	if workers < 4 || workers > 8 {
		t.Errorf("%d workers started for Concurrency 8", workers)
	}
	if n := workerGoroutines(); n != workers {
		t.Errorf("%d worker goroutines running, %d started", n, workers)
	}
	s.Close()
	if n := workerGoroutines(); n != 0 {
		t.Errorf("%d of the %d workers still running after Close", n, workers)
	}
}

// workerGoroutines counts goroutines whose stack is in (*Sink).worker. It
// looks at stacks rather than runtime.NumGoroutine, which the HTTP/2 server
// and transport goroutines of the same test move up and down on their own.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "http2sink.(*Sink).worker(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := New(Config{URL: "http://" + addr + "/", MaxRetries: 1, BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(context.Background(), makeBatch(3, 100, "refused")); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Send: %v", err)
	}
	if s.Connected() || s.Retries() == 0 {
		t.Errorf("Connected %v Retries %d", s.Connected(), s.Retries())
	}
}

func TestFireAndForget(t *testing.T) {
	c := newConsumer()
	c.block = make(chan struct{})
	s, err := New(Config{URL: startH2C(t, c), FireAndForget: true, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	batch := makeBatch(50, 1000, "faf")
	want := makeBatch(50, 1000, "faf")
	done := make(chan error, 1)
	go func() { done <- s.Send(context.Background(), batch) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(c.block)
		t.Fatal("Send waited for the answers")
	}
	// The caller reuses its buffers right away; the requests must not care.
	for _, cp := range batch {
		for i := range cp.Raw {
			cp.Raw[i] = '!'
		}
	}
	close(c.block)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.bodies)
		c.mu.Unlock()
		if n == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.check(t, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), want); err == nil {
		t.Error("Send after Close succeeded")
	}
}

func TestFireAndForgetUnwritable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := New(Config{URL: "http://" + addr + "/", FireAndForget: true, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(context.Background(), makeBatch(3, 100, "x")); err == nil {
		t.Fatal("fire-and-forget Send to a closed port succeeded")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "url: required"},
		{"bad scheme", Config{URL: "ftp://x/"}, "scheme must be"},
		{"no host", Config{URL: "http:///x"}, "no host"},
		{"tls on http", Config{URL: "http://x/", TLS: &tls.Config{}}, "TLS configured"},
		{"unparsable", Config{URL: "http://[::1"}, "url"},
		{"backoff inverted", Config{URL: "http://x/", BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want %q", err, tt.want)
			}
		})
	}
}

// BenchmarkSend posts batches of 256 copies of 3 KB over h2c on loopback.
func BenchmarkSend(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	s, err := New(Config{URL: startH2C(b, h), Logger: testkit.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := makeBatch(256, 3000, "bench")
	testkit.BenchSends(b, batch, s.Send)
}

// A copy the consumer refuses with 413 is set aside, not its batch; a batch
// that fails is sent again without what was answered 2xx. (One request at
// a time, so that none is in flight when the batch fails: those are sent
// again, their answer unknown.)
func TestRejectedAndNotResent(t *testing.T) {
	c := newConsumer()
	batch := makeBatch(20, 300, "r")
	big := makeBatch(1, 5000, "big")[0]
	flaky := string(batch[7].Raw)
	c.answer = func(body string, attempt int) int {
		switch {
		case len(body) > 4000:
			return http.StatusRequestEntityTooLarge
		case body == flaky && attempt == 1:
			return http.StatusBadRequest // not retried by the sink: the batch fails
		}
		return http.StatusOK
	}
	s, err := New(Config{URL: startH2C(t, c), Concurrency: 1, MaxRetries: 1, BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond, Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	all := append(append([]*nfcopy.Copy(nil), batch...), big)
	if err := s.Send(ctx, all); err == nil {
		t.Fatal("a 400 did not fail the batch")
	}
	if rej, _ := s.Rejected(); len(rej) != 0 {
		t.Fatalf("a failed batch reported %d rejections", len(rej))
	}
	if err := s.Send(ctx, all); err != nil { // the feed's retry of the same batch
		t.Fatal(err)
	}
	rej, why := s.Rejected()
	if len(rej) != 1 || rej[0] != big || !strings.Contains(why[0], "413") {
		t.Fatalf("rejected %v %q, want the big copy with its 413", len(rej), why)
	}
	c.check(t, batch) // each of the 20 answered 2xx exactly once
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cp := range batch {
		if want := 1 + btoi(i == 7); c.attempts[string(cp.Raw)] != want {
			t.Errorf("copy %d posted %d times, want %d", i, c.attempts[string(cp.Raw)], want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
