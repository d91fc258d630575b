package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/testkit"
)

// testConfig is a serve config on loopback ports with a temp data dir.
func testConfig(t *testing.T, dataDir string, director bool) config.Serve {
	t.Helper()
	return config.Serve{
		DataDir:              dataDir,
		HTTPAddr:             "127.0.0.1:0",
		CURRIAddr:            "127.0.0.1:0",
		Store:                "sqlite",
		AdminToken:           "test-admin-token",
		LogFormat:            "text",
		LogLevel:             "warn",
		CallLogMaxAge:        time.Hour,
		CallLogMaxRows:       100000,
		Director:             director,
		KafkaAddr:            "127.0.0.1:0",
		KafkaTopics:          "SCP=4,NRF=2,SEPP=2,DIAMETER=2",
		KafkaRetention:       5 * time.Minute,
		KafkaRetentionBytes:  1 << 28,
		KafkaMaxMessageBytes: 1 << 20,
		KafkaMaxRequestBytes: 100 << 20,
		KafkaLocalAnonymous:  true,
		KafkaCreateTopics:    true,
		IngestAddr:           "127.0.0.1:0",
		CaptureMax:           4,
		ShutdownTimeout:      5 * time.Second,
	}
}

func startServer(t *testing.T, cfg config.Serve) *Server {
	t.Helper()
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	s, err := Start(context.Background(), cfg, logs)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, logs.String())
	}
	return s
}

// lockedBuffer is a process's output, written and read at once.
type lockedBuffer = testkit.SyncBuffer

// cucm speaks to the CURRI listener like a CallManager node: one persistent
// HTTP/1.1 connection, HEAD keepalives, POSTs with CUCM's headers.
type cucm struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	host string
}

func dialCUCM(t *testing.T, addr string) *cucm {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &cucm{t: t, conn: c, br: bufio.NewReader(c), host: addr}
}

func (c *cucm) do(method, path, body string) (*http.Response, string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n", method, path, c.host)
	if method == "POST" {
		fmt.Fprintf(&b, "Content-type: text/xml; charset=ISO-8859-1\r\nmethodName: isRoleAccessAllowed\r\n")
	}
	fmt.Fprintf(&b, "User-Agent: CiscoUCM-HttpClient/1.0\r\nConnection:Keep-Alive\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	req, _ := http.NewRequest(method, path, nil)
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(data)
}

func xacmlRequest(calling, called string) string {
	attr := func(id, v string) string {
		return `<Attribute AttributeId="urn:Cisco:uc:1.0:` + id + `" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>` + v + `</AttributeValue></Attribute>`
	}
	return `<?xml version="1.0" encoding="UTF-8"?>
<Request xmlns="urn:oasis:names:tc:xacml:2.0:context:schema:os">
<Subject SubjectCategory="urn:oasis:names:tc:xacml:1.0:subject-category:access-subject">
<Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:subject:role-id" DataType="http://www.w3.org/2001/XMLSchema#string" Issuer="requestor"><AttributeValue>CISCO:UC:UCMPolicy</AttributeValue></Attribute>
` + attr("callingnumber", calling) + attr("callednumber", called) + attr("transformedcgpn", "+1"+calling) + attr("transformedcdpn", "+1"+called) + `
</Subject>
<Resource><Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:resource:resource-id" DataType="http://www.w3.org/2001/XMLSchema#anyURI"><AttributeValue>CISCO:UC:VoiceOrVideoCall</AttributeValue></Attribute></Resource>
<Action><Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:action:action-id" DataType="http://www.w3.org/2001/XMLSchema#anyURI"><AttributeValue>any</AttributeValue></Attribute></Action>
<Environment><Attribute AttributeId="urn:Cisco:uc:1.0:triggerpointtype" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>translationpattern</AttributeValue></Attribute></Environment>
</Request>`
}

func apiDo(t *testing.T, s *Server, method, path, body string) (int, []byte) {
	t.Helper()
	return apiAs(t, s, s.AdminToken(), method, path, body)
}

// apiAs is apiDo with the bearer token given.
func apiAs(t *testing.T, s *Server, token, method, path, body string) (int, []byte) {
	t.Helper()
	return apiAt(t, s.HTTPAddr(), token, method, path, body)
}

// apiAt is apiAs for the server at addr (another process, say).
func apiAt(t *testing.T, addr, token, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func decisionOf(t *testing.T, body string) string {
	t.Helper()
	i := strings.Index(body, "<Decision>")
	j := strings.Index(body, "</Decision>")
	if i < 0 || j < i {
		t.Fatalf("no Decision in %q", body)
	}
	return body[i+len("<Decision>") : j]
}

// TestCURRIEndToEnd: CUCM-style keepalive and calls; a rule created through
// the API denies the next call; the rule survives a restart; the call log
// records the decisions.
func TestCURRIEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(t, dir, false))

	if code, body := get(t, "http://"+s.HTTPAddr()+"/readyz"); code != 200 {
		t.Fatalf("readyz %d %s", code, body)
	}

	c := dialCUCM(t, s.CURRIAddr())
	resp, _ := c.do("HEAD", "/curri/default", "")
	if resp.StatusCode != 200 {
		t.Fatalf("HEAD: %d", resp.StatusCode)
	}
	resp, body := c.do("POST", "/curri/default", xacmlRequest("9725550101", "50102"))
	if resp.StatusCode != 200 || decisionOf(t, body) != "Permit" {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}

	code, b := apiDo(t, s, "POST", "/api/v1/policies/default/rules",
		`{"priority":10,"match":{"calling":"9725550101"},"action":{"decision":"deny","announce":"user_unavailable","reason":"blocked"},"description":"nuisance caller"}`)
	if code != 201 {
		t.Fatalf("create rule: %d %s", code, b)
	}
	var rule struct{ ID int64 }
	json.Unmarshal(b, &rule)
	if rule.ID == 0 {
		t.Fatalf("no id in %s", b)
	}

	// The change applies without restart, within the reload latency.
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, body = c.do("POST", "/curri/default", xacmlRequest("9725550101", "50102"))
		if decisionOf(t, body) == "Deny" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rule not applied: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(body, "user_unavailable") {
		t.Fatalf("deny without the announcement: %s", body)
	}
	// Other callers still pass; HEAD still answers on the same connection.
	if _, body = c.do("POST", "/curri", xacmlRequest("2145550000", "50102")); decisionOf(t, body) != "Permit" {
		t.Fatalf("other caller: %s", body)
	}
	if resp, _ = c.do("HEAD", "/curri", ""); resp.StatusCode != 200 {
		t.Fatal("HEAD after POSTs")
	}
	// Malformed and hostile input: Indeterminate, never a hang.
	if _, body = c.do("POST", "/curri/default", `<!DOCTYPE x [<!ENTITY a "b">]><Request/>`); decisionOf(t, body) != "Indeterminate" {
		t.Fatalf("doctype: %s", body)
	}
	if _, body = c.do("POST", "/curri/nosuchpolicy", xacmlRequest("1", "2")); decisionOf(t, body) != "Indeterminate" {
		t.Fatalf("unknown policy: %s", body)
	}

	// Querying an unknown policy raises an alarm (the watcher runs every 5 s).
	deadline = time.Now().Add(8 * time.Second)
	for {
		code, b := apiDo(t, s, "GET", "/api/v1/alarms", "")
		if code == 200 && strings.Contains(string(b), `"id":"curri/nosuchpolicy/curri_unknown_policy"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unknown-policy alarm: %d %s", code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The call log has the decisions (written asynchronously).
	deadline = time.Now().Add(5 * time.Second)
	for {
		code, b = apiDo(t, s, "GET", "/api/v1/calls?number=9725550101&decision=deny", "")
		if code == 200 && strings.Contains(string(b), `"rule_id":`+strconv.FormatInt(rule.ID, 10)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("call log: %d %s", code, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Metrics count the calls.
	_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{`signalbox_curri_requests_total{decision="deny",policy="default"}`, `signalbox_curri_errors_total{reason="doctype"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	if err := s.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	// Restart on the same data dir: the rule still applies at once.
	s2 := startServer(t, testConfig(t, dir, false))
	defer s2.Shutdown()
	c2 := dialCUCM(t, s2.CURRIAddr())
	if _, body = c2.do("POST", "/curri/default", xacmlRequest("9725550101", "50102")); decisionOf(t, body) != "Deny" {
		t.Fatalf("after restart: %s", body)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMainUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "signalbox ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := Main(context.Background(), []string{"nope"}, &out, &errb); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"serve", "-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-curri-addr") {
		t.Fatalf("serve -h: %d %q", code, errb.String())
	}
	if code := Main(context.Background(), []string{"serve", "-store", "mysql://x"}, &out, &errb); code != 2 {
		t.Fatalf("bad flag exit %d", code)
	}
}
