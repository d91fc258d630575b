package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestRenderRequestGolden(t *testing.T) {
	got := renderRequest("127.0.0.1:4080", "/curri/default", call{calling: "9725550101", called: "50102"})
	golden := filepath.Join("testdata", "request.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rendered request differs from %s:\n%s", golden, got)
	}
	// The request must be one well-formed HTTP/1.1 message with CUCM's
	// headers, exactly as long as it says.
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(got)))
	if err != nil {
		t.Fatalf("net/http cannot read the rendered request: %v", err)
	}
	body, _ := io.ReadAll(req.Body)
	if int64(len(body)) != req.ContentLength || !bytes.HasSuffix(got, body) {
		t.Errorf("Content-Length %d, body %d bytes", req.ContentLength, len(body))
	}
	for k, v := range map[string]string{
		"Content-Type": "text/xml; charset=ISO-8859-1",
		"Methodname":   "isRoleAccessAllowed",
		"User-Agent":   "CiscoUCM-HttpClient/1.0",
		"Connection":   "Keep-Alive",
	} {
		if got := req.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if !bytes.Contains(got, []byte("\r\nConnection:Keep-Alive\r\n")) {
		t.Error("CUCM writes Connection:Keep-Alive without a space")
	}
}

func TestReadResponse(t *testing.T) {
	permit := "<Response><Result><Decision>Permit</Decision></Result></Response>"
	tests := []struct {
		name    string
		in      string
		head    bool
		status  int
		dec     int
		close   bool
		wantErr string
		rest    string // what must remain unread (the next response)
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: " + fmt.Sprint(len(permit)) + "\r\n\r\n" + permit + "NEXT",
			status: 200, dec: decPermit, rest: "NEXT"},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n<Deci\r\n1c;x=y\r\nsion>Deny</Decision></Result\r\n0\r\nTrailer: 1\r\n\r\nNEXT",
			status: 200, dec: decDeny, rest: "NEXT"},
		{name: "head ignores length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nNEXT", head: true, status: 200, rest: "NEXT"},
		{name: "204", in: "HTTP/1.1 204 No Content\r\n\r\nNEXT", status: 204, rest: "NEXT"},
		{name: "indeterminate, close", in: "HTTP/1.1 200 OK\r\ncontent-length: 37\r\nconnection: close\r\n\r\n<Decision>Indeterminate</Decision>   ",
			status: 200, dec: decIndeterminate, close: true},
		{name: "not applicable, LF only", in: "HTTP/1.0 200 OK\nContent-Length: 34\n\n<Decision>NotApplicable</Decision>", status: 200, dec: decNotApplicable},
		{name: "500 without decision", in: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", status: 500, dec: decOther},
		{name: "to EOF", in: "HTTP/1.1 200 OK\r\n\r\n<Decision>Deny</Decision>", status: 200, dec: decDeny, close: true},
		{name: "unknown decision", in: "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n<Decision>Maybe</Decision>", status: 200, dec: decOther},
		{name: "bad status line", in: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: "malformed HTTP response: status line"},
		{name: "not http", in: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: "malformed HTTP response: status line"},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "Content-Length"},
		{name: "huge length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n", wantErr: "Content-Length"},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", wantErr: "header line"},
		{name: "short body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", wantErr: "unexpected EOF"},
		{name: "bad chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: "chunk size"},
		{name: "truncated headers", in: "HTTP/1.1 200 OK\r\nContent-Le", wantErr: "unexpected EOF"},
		{name: "empty", in: "", wantErr: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 4096)
			resp, _, err := readResponse(br, tt.head, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.status != tt.status || resp.decision != tt.dec || resp.close != tt.close {
				t.Errorf("got %+v, want status %d decision %s close %v", resp, tt.status, decisionNames[tt.dec], tt.close)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != tt.rest {
				t.Errorf("left unread %q, want %q", rest, tt.rest)
			}
		})
	}
}

// FuzzReadResponse: any bytes give a response or an error, never a panic
// or a read past the input.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n<Decision>Deny</Decision>x"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		resp, body, err := readResponse(br, head, nil)
		if err == nil && (resp.status < 100 || resp.status > 999) {
			t.Fatalf("accepted status %d", resp.status)
		}
		if len(body) > len(in) {
			t.Fatalf("body of %d bytes from %d bytes of input", len(body), len(in))
		}
	})
}

func TestParseProcMetrics(t *testing.T) {
	page := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
process_resident_memory_bytes 4.2e+07 1700000000000
go_goroutines{x="y"} 12
`
	ps, err := parseProcMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if ps.cpuSeconds != 12.5 || ps.rssBytes != 4.2e7 {
		t.Errorf("got %+v", ps)
	}
	if _, err := parseProcMetrics(strings.NewReader("go_goroutines 3\n")); err == nil || !strings.Contains(err.Error(), "process collector") {
		t.Errorf("page without the process collector: err = %v", err)
	}

	hist := func(a, b, c, inf int) string {
		return fmt.Sprintf("process_cpu_seconds_total 1\nprocess_resident_memory_bytes 1\n"+
			durationBucket+"{le=\"0.001\"} %d\n"+durationBucket+"{le=\"0.005\"} %d\n"+
			durationBucket+"{le=\"0.1\"} %d\n"+durationBucket+"{le=\"+Inf\"} %d\n", a, b, c, inf)
	}
	first, _ := parseProcMetrics(strings.NewReader(hist(10, 10, 10, 10)))
	last, _ := parseProcMetrics(strings.NewReader(hist(1000, 1099, 1109, 1110)))
	if len(last.buckets) != 4 {
		t.Fatalf("buckets %+v", last.buckets)
	}
	// 1,100 requests in the window: 990 <= 1 ms, 1,089 <= 5 ms, 1,099 <= 100 ms, one slower.
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.5, 0.001}, {0.9, 0.001}, {0.99, 0.005}, {0.999, 0.1}, {1, math.Inf(1)}} {
		if got := bucketQuantile(first.buckets, last.buckets, c.q); got != c.want {
			t.Errorf("quantile %v = %v, want %v", c.q, got, c.want)
		}
	}
	if got := bucketQuantile(first.buckets, first.buckets, 0.5); got != -1 {
		t.Errorf("no requests: %v", got)
	}
}

// fakeCURRI is a small real HTTP/1.1 server answering like a CURRI server:
// HEAD 200, POST decides Deny for calling numbers of the exact-rule space.
// hold, when set, makes every POST wait until it is closed (a stall).
type fakeCURRI struct {
	heads, posts atomic.Int64
	badHeaders   atomic.Int64
	mu           sync.Mutex
	hold         chan struct{}
}

func (f *fakeCURRI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		f.heads.Add(1)
		return
	}
	f.posts.Add(1)
	if r.Header.Get("User-Agent") != "CiscoUCM-HttpClient/1.0" || r.Header.Get("methodName") != "isRoleAccessAllowed" {
		f.badHeaders.Add(1)
	}
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	body, _ := io.ReadAll(r.Body)
	dec := "Permit"
	if bytes.Contains(body, []byte("callingnumber\" DataType=\"http://www.w3.org/2001/XMLSchema#string\"><AttributeValue>"+exactPrefix)) {
		dec = "Deny"
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, "<Response><Result><Decision>%s</Decision><Status></Status></Result></Response>", dec)
}

func startFake(t *testing.T) (*fakeCURRI, string) {
	t.Helper()
	f := &fakeCURRI{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, strings.TrimPrefix(srv.URL, "http://")
}

func testPool(addr string, n int) []pooled {
	shape := RuleShape{Exact: 100, Regex: 20, Prefix: 10, Pattern: 10, Allow: 5, Block: 5}
	calls := drawCalls(shape, n, newRand(7), 0)
	pool := make([]pooled, n)
	for i, c := range calls {
		pool[i] = pooled{class: c.class, req: renderRequest(addr, "/curri/default", c)}
	}
	return pool
}

// The vegeta targets carry the bench's own requests: the same body, CUCM's
// headers, one line of vegeta's JSON format per call.
func TestVegetaTargets(t *testing.T) {
	calls := []call{{calling: "9725550101", called: "50102"}, {calling: "2125550123", called: "+18005550199"}}
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := writeVegetaTargets(path, "http://127.0.0.1:4080/curri/default", calls); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(calls) {
		t.Fatalf("%d lines for %d calls", len(lines), len(calls))
	}
	for i, l := range lines {
		var tg struct {
			Method, URL string
			Body        string // base64, as vegeta reads it
			Header      map[string][]string
		}
		if err := json.Unmarshal([]byte(l), &tg); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		body, err := base64.StdEncoding.DecodeString(tg.Body)
		if err != nil {
			t.Fatalf("line %d body: %v", i+1, err)
		}
		req := renderRequest("127.0.0.1:4080", "/curri/default", calls[i])
		if !bytes.HasSuffix(req, body) || tg.Method != "POST" || tg.URL != "http://127.0.0.1:4080/curri/default" {
			t.Errorf("line %d: %s %s, body %q: not the bench's request", i+1, tg.Method, tg.URL, body)
		}
		if got := tg.Header["Content-Type"]; len(got) != 1 || got[0] != "text/xml; charset=ISO-8859-1" {
			t.Errorf("line %d: Content-Type %v", i+1, got)
		}
	}
}

func TestDriveOpenLoop(t *testing.T) {
	for _, pace := range testPaces() {
		t.Run(pace, func(t *testing.T) { driveOpenLoop(t, pace) })
	}
}

func driveOpenLoop(t *testing.T, pace string) {
	f, addr := startFake(t)
	const rate, conns = 400, 4
	res, err := drive(context.Background(), driveConfig{
		addr: addr, head: renderHead(addr, "/curri/default"), pool: testPool(addr, 500),
		conns: conns, rate: rate, pace: pace, warmup: 200 * time.Millisecond, duration: time.Second, timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	tl := res.tally
	if tl.transport != 0 || tl.non200 != 0 || tl.unsent != 0 || tl.warmupErr != 0 {
		t.Fatalf("errors: %+v (first: %s)", tl, tl.firstErr)
	}
	// The schedule is exact: 400 slots in the measured second, 80 before.
	if tl.calls < rate-2 || tl.calls > rate+2 {
		t.Errorf("measured calls = %d, want ~%d", tl.calls, rate)
	}
	if tl.warmup < 78 || tl.warmup > 82 {
		t.Errorf("warmup calls = %d, want ~80", tl.warmup)
	}
	if tl.decisions[decPermit] == 0 || tl.decisions[decDeny] == 0 {
		t.Errorf("decisions %v: want both Permit and Deny", tl.decisions)
	}
	if n := tl.byClass[classExact][decPermit]; n != 0 {
		t.Errorf("%d exact-class calls permitted by a server that denies them all", n)
	}
	if got := f.heads.Load(); got != conns {
		t.Errorf("HEAD probes = %d, want one per connection (%d)", got, conns)
	}
	if f.badHeaders.Load() != 0 {
		t.Errorf("%d requests without CUCM's headers", f.badHeaders.Load())
	}
	if tl.hist.TotalCount() != tl.calls {
		t.Errorf("histogram holds %d values for %d calls", tl.hist.TotalCount(), tl.calls)
	}
}

// A storm opens its connections halfway, each with its HEAD probe, besides
// the calls' own.
func TestDriveStorm(t *testing.T) {
	f, addr := startFake(t)
	res, err := drive(context.Background(), driveConfig{
		addr: addr, head: renderHead(addr, "/curri/default"), pool: testPool(addr, 100),
		conns: 2, rate: 200, pace: paceRuntime, duration: 400 * time.Millisecond, timeout: 2 * time.Second, storm: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := res.storm
	if st == nil || st.conns != 7 || st.errors != 0 || st.connect.TotalCount() != 7 {
		t.Fatalf("storm %+v", st)
	}
	if got := f.heads.Load(); got != 2+7 {
		t.Errorf("HEAD probes = %d, want 2 for the calls' connections and 7 for the storm's", got)
	}
	if res.genCPU <= 0 {
		t.Errorf("generator CPU %v: want the bench's own, measured", res.genCPU)
	}
}

// A server that stalls every call for 300 ms must show the calls that were
// due during the stall as slow, not just the few in flight: latency runs
// from the intended send time.
func TestDriveOpenLoopChargesStalls(t *testing.T) {
	f, addr := startFake(t)
	const rate = 200
	go func() {
		time.Sleep(400 * time.Millisecond)
		hold := make(chan struct{})
		f.mu.Lock()
		f.hold = hold
		f.mu.Unlock()
		time.Sleep(300 * time.Millisecond)
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
	}()
	res, err := drive(context.Background(), driveConfig{
		addr: addr, head: renderHead(addr, "/curri/default"), pool: testPool(addr, 100),
		conns: 4, rate: rate, duration: 1500 * time.Millisecond, timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := res.tally.hist
	// ~60 slots fall due during the stall; their latency is the rest of it.
	slow := h.TotalCount() - countBelow(h, 100_000)
	if slow < 30 {
		t.Errorf("%d calls over 100 ms after a 300 ms stall at %d/s, want >= 30 (coordinated omission?)", slow, rate)
	}
	if h.Max() < 250_000 {
		t.Errorf("max latency %d µs after a 300 ms stall", h.Max())
	}
	if res.tally.transport != 0 {
		t.Errorf("transport errors: %d (%s)", res.tally.transport, res.tally.firstErr)
	}
}

func countBelow(h *hdrhistogram.Histogram, us int64) int64 {
	var n int64
	for _, b := range h.Distribution() {
		if b.To <= us {
			n += b.Count
		}
	}
	return n
}

func TestDriveClosedLoop(t *testing.T) {
	f, addr := startFake(t)
	res, err := drive(context.Background(), driveConfig{
		addr: addr, head: renderHead(addr, "/curri/default"), pool: testPool(addr, 50),
		conns: 2, rate: 0, duration: 300 * time.Millisecond, timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.tally.calls < 50 || res.tally.transport != 0 || res.tally.non200 != 0 {
		t.Errorf("closed loop: %d calls, %d transport errors, %d non-200 (%s)", res.tally.calls, res.tally.transport, res.tally.non200, res.tally.firstErr)
	}
	if f.posts.Load() < res.tally.calls {
		t.Errorf("server saw %d POSTs, bench counted %d", f.posts.Load(), res.tally.calls)
	}
}

func TestDriveRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = drive(context.Background(), driveConfig{
		addr: addr, head: renderHead(addr, "/curri/default"), pool: testPool(addr, 10),
		conns: 2, rate: 10, duration: time.Second, timeout: time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "connection 1") {
		t.Errorf("err = %v, want a dial error naming connection 1", err)
	}
}

func TestHeadProbeRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusMethodNotAllowed)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := newConn(addr, renderHead(addr, "/curri/default"), time.Second)
	err := c.connect()
	if err == nil || !strings.Contains(err.Error(), "HEAD probe: status 405") {
		t.Errorf("err = %v, want the HEAD probe's 405", err)
	}
}
