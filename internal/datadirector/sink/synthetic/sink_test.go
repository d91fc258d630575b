package synthetic

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"

	"github.com/signalbox/signalbox/internal/testkit/pki"
	"github.com/signalbox/signalbox/internal/testkit/ports"
)

// selfSigned returns a server certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ca := pki.NewCA(t, "probe-ca")
	return ca.Server(t, "127.0.0.1").TLS, ca.Pool
}

// readN reads exactly n bytes from conn or fails.
func readN(t *testing.T, conn net.Conn, n int) []byte {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(conn, b); err != nil {
		t.Fatalf("probe read %d bytes: %v", n, err)
	}
	return b
}

func TestSinkStreamsAndReconnects(t *testing.T) {
	cert, pool := selfSigned(t)
	for _, useTLS := range []bool{false, true} {
		name := "tcp"
		if useTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Endpoint: ln.Addr().String(), Logger: testkit.Logger(), BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
			if useTLS {
				ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
				cfg.TLS = &tls.Config{RootCAs: pool}
			}
			defer ln.Close()
			conns := make(chan net.Conn, 4)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					if tc, ok := c.(*tls.Conn); ok {
						// The dialer waits for the handshake; a
						// probe completes it on accept.
						if err := tc.Handshake(); err != nil {
							c.Close()
							continue
						}
					}
					conns <- c
				}
			}()
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()

			batch1 := sampleCopies()
			if err := s.Send(ctx, batch1); err != nil {
				t.Fatal(err)
			}
			if !s.Connected() {
				t.Fatal("not connected after Send")
			}
			// The stream is deterministic: a fresh encoder gives the bytes.
			want1 := encodeAll(EncoderOptions{}, batch1)
			conn1 := <-conns
			got1 := readN(t, conn1, len(want1))
			if !bytes.Equal(got1, want1) {
				t.Fatal("first connection: stream differs from the encoding")
			}
			msgs, err := decodeStream(got1)
			if err != nil {
				t.Fatal(err)
			}
			checkMessages(t, batch1, msgs)

			// More on the same connection: no global header, no set-up.
			batch2 := []*nfcopy.Copy{request(50, nfcopy.RequestIngress, jsonBody(3000))}
			if err := s.Send(ctx, batch2); err != nil {
				t.Fatal(err)
			}
			e := NewEncoder(EncoderOptions{})
			for _, c := range batch1 {
				e.AppendCopy(nil, c)
			}
			want2 := e.AppendCopy(nil, batch2[0])
			if got := readN(t, conn1, len(want2)); !bytes.Equal(got, want2) {
				t.Fatal("second batch differs")
			}

			// The probe drops the connection; the sink notices and the
			// next Send reconnects, re-sending header and set-up records.
			conn1.Close()
			deadline := time.Now().Add(5 * time.Second)
			for s.Connected() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if s.Connected() {
				t.Fatal("sink did not notice the dropped connection")
			}
			batch3 := sampleCopies()[:2]
			if err := s.Send(ctx, batch3); err != nil {
				t.Fatal(err)
			}
			want3 := encodeAll(EncoderOptions{}, batch3)
			conn2 := <-conns
			defer conn2.Close()
			if got := readN(t, conn2, len(want3)); !bytes.Equal(got, want3) {
				t.Fatal("after reconnect: stream differs from a fresh encoding")
			}
			if s.Retries() != 1 {
				t.Errorf("Retries() = %d, want 1", s.Retries())
			}
		})
	}
}

func TestSinkConnectFailureBacksOff(t *testing.T) {
	// Nothing listens, until this test does: a reserved port.
	addr := ports.Reserve(t, "127.0.0.1")
	s, err := New(Config{Endpoint: addr, Logger: testkit.Logger(), BackoffMin: time.Second, BackoffMax: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(context.Background(), sampleCopies()); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("Send to a closed port: %v", err)
	}
	if s.Connected() || s.LastError() == "" {
		t.Fatalf("Connected %v, LastError %q", s.Connected(), s.LastError())
	}
	// The next attempt waits out the backoff (1 s); a short ctx gives up
	// first. The bound is half the backoff, so a loaded box does not fail
	// it, and a Send that waited the backoff out does.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Send(ctx, sampleCopies())
	if err == nil || ctx.Err() == nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Send during backoff: %v after %v", err, time.Since(start))
	}

	// Once something listens again, a Send after the backoff succeeds.
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("relisten %s: %v", addr, err)
	}
	defer ln2.Close()
	go func() {
		c, err := ln2.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	if err := s.Send(context.Background(), sampleCopies()); err != nil {
		t.Fatalf("Send after listener is back: %v", err)
	}
	if s.Retries() != 1 {
		t.Errorf("Retries() = %d, want 1", s.Retries())
	}
}

func TestSinkClosed(t *testing.T) {
	s, err := New(Config{Endpoint: "127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), sampleCopies()); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no endpoint", Config{}, "endpoint: required"},
		{"no port", Config{Endpoint: "probe.example"}, "missing port"},
		{"bad port", Config{Endpoint: "probe.example:http"}, "invalid port"},
		{"zero port", Config{Endpoint: "probe.example:0"}, "invalid port"},
		{"mapping without address", Config{Endpoint: "p:1", Mappings: []Mapping{{NFFQDN: "a"}}}, "mappings[0]: invalid address"},
		{"mapping without NF", Config{Endpoint: "p:1", Mappings: []Mapping{{Addr: netip.MustParseAddrPort("192.0.2.1:80")}}}, "mappings[0]: needs"},
		{"backoff inverted", Config{Endpoint: "p:1", BackoffMin: time.Second, BackoffMax: time.Millisecond}, "backoff max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want error containing %q", err, tt.want)
			}
		})
	}
	if _, err := New(Config{Endpoint: "[::1]:4000"}); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

// BenchmarkSinkSend measures a whole batch (256 copies of 3 KB) encoded and
// written to a loopback TCP reader.
func BenchmarkSinkSend(b *testing.B) {
	s, err := New(Config{Endpoint: discardingReader(b), Logger: testkit.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]*nfcopy.Copy, 256)
	for i := range batch {
		batch[i] = request(i, nfcopy.RequestIngress, jsonBody(3000))
	}
	testkit.BenchSends(b, batch, s.Send)
}

// TestSinkCountsEvictedFlows: a sink whose flow table holds 8 flows, sent
// copies of 40 distinct flows twice, reports each flow pushed out of the
// table (FlowsEvicted, the feed's signalbox_feed_flows_evicted_total).
func TestSinkCountsEvictedFlows(t *testing.T) {
	s, err := New(Config{Endpoint: discardingReader(t), Logger: testkit.Logger(), MaxFlows: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const flows = 40
	batch := make([]*nfcopy.Copy, flows)
	for i := range batch {
		batch[i] = request(i, nfcopy.RequestIngress, jsonBody(100))
		batch[i].SourceIP, batch[i].SourcePort = fmt.Sprintf("10.9.0.%d", i+1), uint16(41000+i)
	}
	ctx := context.Background()
	for range 2 {
		if err := s.Send(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// The first 8 flows fit; every other opening pushes one out (the
	// table's sets may push one out before it is full: at least that).
	if n := s.FlowsEvicted(); n < 2*flows-8 || n > 2*flows {
		t.Fatalf("FlowsEvicted = %d, want %d to %d", n, 2*flows-8, 2*flows)
	}
}

// discardingReader is the address of a loopback consumer that reads and
// drops one connection's stream.
func discardingReader(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	return ln.Addr().String()
}
