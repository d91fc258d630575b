package curri

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit/pki"
)

// dialFrom connects to addr from the local address from (127.0.0.x: all of
// 127/8 is this host's on Linux).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// keepalive sends CUCM's HEAD probe on c and reads the answer.
func keepalive(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, error) {
	t.Helper()
	if _, err := io.WriteString(c, "HEAD /curri HTTP/1.1\r\nHost: pdp\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// TestAccessPlain: on a plain listener, an address outside the networks is
// answered 403 at once and one past the per-address bound 503; both are
// counted by reason, and the bound frees up when a connection closes.
func TestAccessPlain(t *testing.T) {
	env := newTestEnv(t, 0)
	srv := NewServer("", env.h, nil)
	srv.Access = &Access{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxConnsPerClient: 2}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	addr := ln.Addr().String()

	// From 127.0.0.2: refused before a byte is read.
	c := dialFrom(t, "127.0.0.2", addr)
	resp, err := keepalive(t, c, bufio.NewReader(c))
	c.Close()
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("a client outside the networks: %v %v", resp, err)
	}
	waitCount(t, env, `signalbox_curri_refused_total{reason="address"} `, 1)

	// From 127.0.0.1: two connections held, the third refused with 503.
	var held []net.Conn
	for range 2 {
		c := dialFrom(t, "127.0.0.1", addr)
		if resp, err := keepalive(t, c, bufio.NewReader(c)); err != nil || resp.StatusCode != 200 {
			t.Fatalf("an allowed client's keepalive: %v %v", resp, err)
		}
		held = append(held, c)
	}
	third := dialFrom(t, "127.0.0.1", addr)
	b, _ := io.ReadAll(third)
	third.Close()
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 503 ")) || !bytes.Contains(b, []byte("already holds 2 connections")) {
		t.Fatalf("the third connection: %q", b)
	}
	waitCount(t, env, `signalbox_curri_refused_total{reason="connections"} `, 1)
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialFrom(t, "127.0.0.1", addr)
		resp, err := keepalive(t, c, bufio.NewReader(c))
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection closed did not free its place: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held[1].Close()
	if env.logs.count("curri client refused reason=address client=127.0.0.2:") != 1 || env.logs.count("reason=connections") != 1 {
		t.Errorf("refusals not logged once each with the client: %v", env.logs.msgs)
	}
}

// TestAccessIdentity: with mutual TLS, a certificate naming an accepted
// client (by CN or by SAN) gets in; another the same CA signed gets a
// bad_certificate alert, counted and logged with its names.
func TestAccessIdentity(t *testing.T) {
	env := newTestEnv(t, 0)
	ca := pki.NewCA(t, "uc-ca")
	srv := NewServer("", env.h, &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "127.0.0.1").TLS},
		ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	srv.Access = &Access{Names: []string{"CUCM-A.example", "cucm-c-san.example"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	ask := func(leaf pki.Leaf) (*http.Response, error) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{leaf.TLS}})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return keepalive(t, c, bufio.NewReader(c))
	}
	for name, leaf := range map[string]pki.Leaf{"by CN": ca.Client(t, "cucm-a.example"), "by SAN": ca.Client(t, "node3", "cucm-c-san.example")} {
		if resp, err := ask(leaf); err != nil || resp.StatusCode != 200 {
			t.Errorf("accepted client %s: %v %v", name, resp, err)
		}
	}
	_, err = ask(ca.Client(t, "cucm-b.example"))
	if err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Fatalf("a client of another cluster: %v, want a bad_certificate alert", err)
	}
	waitCount(t, env, `signalbox_curri_refused_total{reason="identity"} `, 1)
	if env.logs.count(`reason=identity`) != 1 || env.logs.count(`CN="cucm-b.example" issuer="uc-ca"`) != 1 {
		t.Errorf("the refused identity is not logged: %v", env.logs.msgs)
	}
}
