package app

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/pki"
)

// TestCURRIClientIdentity: signalbox serve (the binary) with mutual TLS for
// two CUCM clusters whose certificates the same CA signed; only cluster A's
// is accepted by name, only 127.0.0.1 may connect, and each address holds at
// most three connections. Cluster A's nodes ask as CUCM does (keep-alive,
// HEAD probes, a routing request); cluster B gets a TLS alert, a node at
// another address and a fourth connection are closed at once; each refusal
// is counted by reason and logged with the client's identity.
func TestCURRIClientIdentity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := pki.NewCA(t, "corp-uc-ca")
	const host = "127.0.33.1"
	srvCert, srvKey := ca.Server(t, host, "localhost").Files(t, dir, "curri")
	clusterA, clusterB := ca.Client(t, "cucm-a.corp.example"), ca.Client(t, "cucm-b.corp.example")
	rogue := pki.NewCA(t, "rogue-ca").Client(t, "cucm-a.corp.example")
	log := filepath.Join(dir, "serve.log")
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", host + ":0", "-admin-token", "test-admin-token",
		"-director=false", "-curri-addr", host + ":0", "-curri-tls-cert", srvCert, "-curri-tls-key", srvKey,
		"-curri-client-ca", ca.File(t, dir, "ca"), "-curri-client-names", "cucm-a.corp.example",
		"-curri-allow-from", "127.0.0.1/32", "-curri-max-conns-per-client", "3"}, log)
	httpAddr, curriAddr := serve.ls.HTTP, serve.ls.CURRI

	dial := func(from string, leaf pki.Leaf) (*tls.Conn, *bufio.Reader, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", curriAddr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{leaf.TLS}})
		if err != nil {
			return nil, nil, err
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c), nil
	}
	ask := func(c net.Conn, br *bufio.Reader, method, body string) (*http.Response, string, error) {
		req := method + " /curri HTTP/1.1\r\nHost: pdp\r\n"
		if body != "" {
			req += "Content-Type: text/xml; charset=ISO-8859-1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"+body); err != nil {
			return nil, "", err
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return nil, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), nil
	}
	xacml, err := os.ReadFile("../callcontrol/curri/testdata/requests/cisco_hello_world.xml")
	if err != nil {
		t.Fatal(err)
	}

	// Cluster A: three nodes' connections, each a HEAD probe and a call.
	var held []*tls.Conn
	for i := range 3 {
		c, br, err := dial("127.0.0.1", clusterA)
		if err != nil {
			t.Fatalf("cluster A connection %d: %v", i, err)
		}
		held = append(held, c)
		if resp, _, err := ask(c, br, "HEAD", ""); err != nil || resp.StatusCode != 200 {
			t.Fatalf("cluster A keepalive: %v %v", resp, err)
		}
		if resp, body, err := ask(c, br, "POST", string(xacml)); err != nil || resp.StatusCode != 200 || !strings.Contains(body, "<Decision>") {
			t.Fatalf("cluster A call: %v %.200s %v", resp, body, err)
		}
	}
	// A fourth connection from that address is closed unanswered.
	if c, br, err := dial("127.0.0.1", clusterA); err == nil {
		if resp, _, err := ask(c, br, "HEAD", ""); err == nil {
			t.Errorf("a fourth connection from one address was answered %d", resp.StatusCode)
		}
		c.Close()
	}
	for _, c := range held {
		c.Close()
	}
	// The server counts them out as it reads their close.
	testkit.WaitForState(t, 10*time.Second, "cluster A's connections closed at the server", func() (bool, string) {
		_, m := get(t, "http://"+httpAddr+"/metrics")
		return strings.Contains(m, "\nsignalbox_curri_connections 0\n"), grepLines(m, "signalbox_curri_connections ")
	})
	// Cluster B, and cluster A's name from another CA: TLS alerts.
	for name, leaf := range map[string]pki.Leaf{"cluster B": clusterB, "another CA": rogue} {
		c, br, err := dial("127.0.0.1", leaf)
		if err == nil {
			_, _, err = ask(c, br, "HEAD", "")
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a TLS certificate alert", name, err)
		}
	}
	// Cluster A's certificate from 127.0.0.2: closed before the handshake.
	if c, br, err := dial("127.0.0.2", clusterA); err == nil {
		if resp, _, err := ask(c, br, "HEAD", ""); err == nil {
			t.Errorf("a client outside -curri-allow-from was answered %d", resp.StatusCode)
		}
		c.Close()
	}

	testkit.WaitForState(t, 10*time.Second, "refusals counted", func() (bool, string) {
		_, m := get(t, "http://"+httpAddr+"/metrics")
		ok := true
		for _, want := range []string{`signalbox_curri_refused_total{reason="address"} 1`, `signalbox_curri_refused_total{reason="connections"} 1`,
			`signalbox_curri_refused_total{reason="identity"} 1`} {
			ok = ok && strings.Contains(m, want)
		}
		return ok && strings.Contains(m, `signalbox_curri_http_errors_total{reason="tls_handshake"} 1`), grepLines(m, "signalbox_curri_refused_total", "tls_handshake")
	})
	b, _ := os.ReadFile(log)
	for _, want := range []string{`reason=identity`, `CN=\"cucm-b.corp.example\"`, `reason=address client=127.0.0.2:`, `reason=connections client=127.0.0.1:`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("serve's log lacks %s", want)
		}
	}
}

// grepLines are the lines of s that contain any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
