package curri

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestNewServerSettings(t *testing.T) {
	env := newTestEnv(t, 0)
	srv := NewServer(":4080", env.h, &tls.Config{NextProtos: []string{"h2", "http/1.1"}})
	if srv.ReadTimeout != 5*time.Second || srv.WriteTimeout != WriteTimeout || srv.IdleTimeout != 5*time.Minute ||
		srv.HandshakeTimeout != ReadHeaderTimeout || srv.MaxHeaderBytes != 16<<10 || srv.Addr != ":4080" {
		t.Errorf("server settings %+v", srv)
	}
	if got := srv.TLSConfig.NextProtos; len(got) != 1 || got[0] != "http/1.1" {
		t.Errorf("ALPN %v, want HTTP/1.1 only", got)
	}
}

// startServer runs NewServer on a loopback port and counts connections.
func startServer(t *testing.T, readTimeout time.Duration) (*testEnv, string, *atomic.Int32) {
	t.Helper()
	env := newTestEnv(t, 0)
	srv := NewServer("127.0.0.1:0", env.h, nil)
	if readTimeout > 0 {
		srv.ReadTimeout = readTimeout
	}
	var conns atomic.Int32
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return env, ln.Addr().String(), &conns
}

// cucmPost is a routing request exactly as CUCM frames it (§2.2 of the
// CURRI notes), including its header spelling "Connection:Keep-Alive".
func cucmPost(addr, path string, body []byte) string {
	return "POST " + path + " HTTP/1.1\r\n" +
		"Host: " + addr + "\r\n" +
		"Accept: */*\r\n" +
		"Content-type: text/xml; charset=ISO-8859-1\r\n" +
		"methodName: isRoleAccessAllowed\r\n" +
		"User-Agent: CiscoUCM-HttpClient/1.0\r\n" +
		"Connection:Keep-Alive\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + string(body)
}

func cucmHead(addr, path string) string {
	return "HEAD " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: CiscoUCM-HttpClient/1.0\r\nConnection:Keep-Alive\r\n\r\n"
}

func TestCUCMConversationOneConnection(t *testing.T) {
	env, addr, conns := startServer(t, 0)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	exchange := func(raw, method string) (*http.Response, string, time.Duration) {
		t.Helper()
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if resp.Close {
			t.Fatalf("server asked to close the connection after %s", method)
		}
		return resp, string(b), took
	}

	resp, body, _ := exchange(cucmHead(addr, "/curri"), "HEAD")
	if resp.StatusCode != 200 || body != "" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	calls := []struct{ path, file, decision, needle string }{
		{"/curri", "cisco_hello_world.xml", "Permit", "callingname="},
		{"/curri", "with_device_name.xml", "Deny", "&lt;reject&gt;"},
		{"/curri/lobby", "gve_capture.xml", "Permit", "&lt;continue&gt;"},
		{"/curri/lobby", "cisco_hello_world.xml", "Permit", "voiceMail"},
		{"/curri", "latin1_device_name.xml", "Permit", "&lt;continue&gt;"},
	}
	for _, call := range calls {
		resp, body, _ := exchange(cucmPost(addr, call.path, readRequest(t, call.file)), "POST")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/xml; charset=utf-8" ||
			resp.ContentLength != int64(len(body)) || resp.Header.Get("Connection") != "Keep-Alive" {
			t.Fatalf("%s: %d %v", call.file, resp.StatusCode, resp.Header)
		}
		if !strings.Contains(body, "<Decision>"+call.decision+"</Decision>") || !strings.Contains(body, call.needle) {
			t.Errorf("%s: want %s with %q, got %s", call.file, call.decision, call.needle, body)
		}
	}
	resp, body, took := exchange(cucmPost(addr, "/curri", readRequest(t, "hostile_billion_laughs.xml")), "POST")
	if resp.StatusCode != 200 || !strings.Contains(body, "<Decision>Indeterminate</Decision>") || !strings.Contains(body, "doctype") {
		t.Errorf("billion laughs: %d %s", resp.StatusCode, body)
	}
	if took > 2*time.Second {
		t.Errorf("DOCTYPE answered in %v; it must be refused before any parsing", took)
	}
	if resp, _, _ := exchange(cucmHead(addr, "/curri/lobby"), "HEAD"); resp.StatusCode != 200 {
		t.Errorf("second HEAD: %d", resp.StatusCode)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for one CUCM node, want 1 reused", n)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.events) != len(calls)+1 || len(env.heads) != 2 {
		t.Errorf("%d events, %d heads", len(env.events), len(env.heads))
	}
	if got := env.events[4].Call.DeviceName; got != "SEPCafé" {
		t.Errorf("latin1 device name %q", got)
	}
}

func TestSlowBodyIsCutOff(t *testing.T) {
	const readTimeout = 500 * time.Millisecond
	env, addr, _ := startServer(t, readTimeout)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := readRequest(t, "cisco_hello_world.xml")
	raw := cucmPost(addr, "/curri", body)
	head := raw[:len(raw)-len(body)]
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	// Trickle one byte every 100 ms, for at most 4 s, until the server hangs up.
	stop := make(chan struct{})
	go func() {
		for i := 0; i < 40 && i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Write(body[i : i+1]); err != nil {
				return
			}
		}
	}()
	defer close(stop)
	_ = c.SetReadDeadline(time.Now().Add(6 * time.Second))
	got, err := io.ReadAll(c)
	took := time.Since(start)
	// A reset is a hang-up too: the server closed with our trickle unread.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed by the server: %v after %v", err, took)
	}
	if took > readTimeout+2*time.Second {
		t.Errorf("slow client held the connection %v with ReadTimeout %v", took, readTimeout)
	}
	// The server answers Indeterminate if it still can, then closes.
	if len(got) > 0 && !strings.Contains(string(got), "Indeterminate") {
		t.Errorf("unexpected reply to a slow body: %q", got)
	}
	if !strings.Contains(scrape(t, env.reg), `signalbox_curri_errors_total{reason="slow_body"} 1`) {
		t.Errorf("slow body not counted:\n%s", scrape(t, env.reg))
	}
}
