package curri

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// listDecider is a small real Decider: per policy, a block list of calling
// numbers (reject with an announcement), a divert map of called numbers, and
// otherwise permit, renaming callers found in a directory.
type listDecider struct {
	policies map[string]listPolicy
}

type listPolicy struct {
	block     map[string]bool
	divert    map[string]string
	directory map[string]string
}

func (d *listDecider) Evaluate(policy string, c *callpolicy.Call, _ time.Time) (callpolicy.Decision, bool) {
	p, ok := d.policies[policy]
	if !ok {
		return callpolicy.Decision{}, false
	}
	out := callpolicy.Decision{Policy: policy, Step: callpolicy.StepDefault, Action: callpolicy.Action{Decision: callpolicy.Permit}}
	switch {
	case p.block[c.Calling]:
		out.Step = callpolicy.StepBlockList
		out.Action = callpolicy.Action{Decision: callpolicy.Deny, Announce: "user_unavailable", Reason: "blocked"}
	case p.divert[c.Called] != "":
		out.Step = callpolicy.StepRule
		out.Action = callpolicy.Action{Decision: callpolicy.Divert, Destination: p.divert[c.Called]}
	case p.directory[c.Calling] != "":
		out.Step = callpolicy.StepRule
		out.Action.Modify = &callpolicy.Modify{CallingName: p.directory[c.Calling]}
	}
	return out, true
}

func (d *listDecider) Has(policy string) bool { _, ok := d.policies[policy]; return ok }

func testDecider() *listDecider {
	return &listDecider{policies: map[string]listPolicy{
		"default": {block: map[string]bool{"+12028055054": true}, directory: map[string]string{"9725550101": "Alice & Co"}},
		"lobby":   {divert: map[string]string{"50102": "voiceMail"}},
	}}
}

func readRequest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/requests/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logSink collects log records for assertions.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.msgs = append(l.msgs, b.String())
	return nil
}
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }
func (l *logSink) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

type testEnv struct {
	h      *Handler
	reg    *prometheus.Registry
	logs   *logSink
	mu     sync.Mutex
	events []Event
	heads  []string
	// flushedBeforeEvent records, per event, whether the response had been
	// flushed when OnDecision ran.
	flushedBeforeEvent []bool
	rec                *httptest.ResponseRecorder
}

func newTestEnv(t testing.TB, maxBody int64) *testEnv {
	t.Helper()
	env := &testEnv{reg: prometheus.NewRegistry(), logs: &logSink{}}
	h, err := NewHandler(HandlerConfig{
		Decider: testDecider(),
		OnDecision: func(ev *Event) {
			env.mu.Lock()
			defer env.mu.Unlock()
			env.events = append(env.events, *ev)
			env.flushedBeforeEvent = append(env.flushedBeforeEvent, env.rec != nil && env.rec.Flushed && env.rec.Body.Len() > 0)
		},
		OnHead:     func(p string, _ bool) { env.mu.Lock(); env.heads = append(env.heads, p); env.mu.Unlock() },
		Registerer: env.reg,
		Logger:     slog.New(env.logs),
		MaxBody:    maxBody,
		Aliases:    map[string]string{"/pdp/AuthorizationEndPoint": "lobby"},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.h = h
	return env
}

func (env *testEnv) do(method, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "text/xml; charset=ISO-8859-1")
	env.rec = httptest.NewRecorder()
	env.h.ServeHTTP(env.rec, req)
	return env.rec
}

func TestHandler(t *testing.T) {
	hello := readRequest(t, "cisco_hello_world.xml")
	device := readRequest(t, "with_device_name.xml")
	tests := []struct {
		name, method, path string
		body               []byte
		status             int
		decision           string // "" = no body expected
		contains           []string
		errReason          string // errors_total label expected to count 1
	}{
		{"permit with rename", "POST", "/curri", hello, 200, "Permit", []string{`callingname="Alice &amp;amp; Co"`}, ""},
		{"deny from block list", "POST", "/curri/default", device, 200, "Deny", []string{"&lt;announce identification=\"user_unavailable\"/&gt;", "&lt;reason&gt;blocked&lt;/reason&gt;"}, ""},
		{"divert to voicemail", "POST", "/curri/lobby", hello, 200, "Permit", []string{"&lt;destination&gt;voiceMail&lt;/destination&gt;"}, ""},
		{"unknown policy", "POST", "/curri/nope", hello, 200, "Indeterminate", []string{"processing-error", "unknown policy &quot;nope&quot;"}, reasonUnknown},
		{"doctype", "POST", "/curri", readRequest(t, "hostile_billion_laughs.xml"), 200, "Indeterminate", []string{"syntax-error", "doctype"}, ReasonDoctype},
		{"malformed", "POST", "/curri", readRequest(t, "broken_mismatched_tag.xml"), 200, "Indeterminate", []string{"closed by &lt;/Subjekt&gt;"}, ReasonMalformed},
		{"missing called", "POST", "/curri", readRequest(t, "broken_missing_called.xml"), 200, "Indeterminate", []string{"status:missing-attribute", "callednumber"}, ReasonMissingAttribute},
		{"empty body", "POST", "/curri", nil, 200, "Indeterminate", []string{"empty body"}, ReasonEmpty},
		{"too large", "POST", "/curri", append(bytes.Repeat([]byte(" "), 4096), hello...), 200, "Indeterminate", []string{"too_large"}, ReasonTooLarge},
		{"head keepalive", "HEAD", "/curri/lobby", nil, 200, "", nil, ""},
		{"get refused", "GET", "/curri", nil, 405, "", nil, ""},
		{"other path", "POST", "/api/v1/curri", hello, 404, "", nil, ""},
		{"nested path", "POST", "/curri/a/b", hello, 404, "", nil, ""},
		{"trailing slash", "POST", "/curri/", hello, 200, "Permit", nil, ""},
		{"capitals and trailing slash", "POST", "/Curri/LOBBY/", hello, 200, "Permit", []string{"voiceMail"}, ""},
		{"alias", "POST", "/pdp/AuthorizationEndPoint", hello, 200, "Permit", []string{"voiceMail"}, ""},
		{"head for an unknown policy", "HEAD", "/curri/typo", nil, 404, "", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, 4096)
			rec := env.do(tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if tc.decision == "" {
				if rec.Body.Len() != 0 {
					t.Errorf("unexpected body %q", rec.Body)
				}
				if len(env.events) != 0 {
					t.Errorf("OnDecision called for %s %s", tc.method, tc.path)
				}
				if want := strings.TrimPrefix(tc.path, "/curri/"); tc.method == "HEAD" && (len(env.heads) != 1 || env.heads[0] != want) {
					t.Errorf("OnHead calls %v, want [%s]", env.heads, want)
				}
				if tc.status == 405 && rec.Header().Get("Allow") != "POST, HEAD" {
					t.Errorf("Allow = %q", rec.Header().Get("Allow"))
				}
				return
			}
			body := rec.Body.String()
			if got := rec.Header().Get("Content-Type"); got != "text/xml; charset=utf-8" {
				t.Errorf("Content-Type %q", got)
			}
			if got := rec.Header().Get("Content-Length"); got != fmt.Sprint(len(body)) {
				t.Errorf("Content-Length %q for %d bytes", got, len(body))
			}
			if !strings.Contains(body, "<Decision>"+tc.decision+"</Decision>") {
				t.Errorf("want %s in %s", tc.decision, body)
			}
			for _, s := range tc.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q: %s", s, body)
				}
			}
			if len(env.events) != 1 || !env.flushedBeforeEvent[0] {
				t.Fatalf("want one event after the flushed response; events %d, flushed %v", len(env.events), env.flushedBeforeEvent)
			}
			ev := env.events[0]
			if ev.Indeterminate != (tc.decision == "Indeterminate") || ev.Indeterminate && ev.Err == "" {
				t.Errorf("event Indeterminate=%v Err=%q", ev.Indeterminate, ev.Err)
			}
			if ev.Latency <= 0 || ev.Start.IsZero() || ev.Client == "" {
				t.Errorf("event lacks timing or client: %+v", ev)
			}
			m := scrape(t, env.reg)
			if tc.errReason != "" && !strings.Contains(m, `signalbox_curri_errors_total{reason="`+tc.errReason+`"} 1`) {
				t.Errorf("errors_total{reason=%q} not 1:\n%s", tc.errReason, m)
			}
			if !strings.Contains(m, "signalbox_curri_request_duration_seconds_count 1") {
				t.Errorf("duration not observed once:\n%s", m)
			}
		})
	}
}

func TestHandlerEventAndMetrics(t *testing.T) {
	env := newTestEnv(t, 0)
	if env.h.maxBody != defaultMaxBody {
		t.Fatalf("default MaxBody %d", env.h.maxBody)
	}
	hello := readRequest(t, "cisco_hello_world.xml")
	env.do("POST", "/curri", hello)
	env.do("POST", "/curri/lobby", hello)
	env.do("POST", "/curri/lobby", hello)
	env.do("POST", "/curri/ghost", hello)
	env.do("POST", "/curri/ghost2", []byte("<oops"))
	env.do("POST", "/curri/lobby", []byte("<oops"))

	ev := env.events[0]
	if ev.Policy != "default" || ev.Call.Calling != "9725550101" || ev.Decision.Action.Decision != callpolicy.Permit ||
		ev.Decision.Step != callpolicy.StepRule {
		t.Errorf("event %+v", ev)
	}
	m := scrape(t, env.reg)
	for _, line := range strings.Split(strings.TrimSpace(`
signalbox_curri_requests_total{decision="deny",policy="_unknown"} 0
signalbox_curri_requests_total{decision="deny",policy="default"} 0
signalbox_curri_requests_total{decision="deny",policy="lobby"} 0
signalbox_curri_requests_total{decision="divert",policy="_unknown"} 0
signalbox_curri_requests_total{decision="divert",policy="default"} 0
signalbox_curri_requests_total{decision="divert",policy="lobby"} 2
signalbox_curri_requests_total{decision="indeterminate",policy="_unknown"} 2
signalbox_curri_requests_total{decision="indeterminate",policy="default"} 0
signalbox_curri_requests_total{decision="indeterminate",policy="lobby"} 1
signalbox_curri_requests_total{decision="permit",policy="_unknown"} 0
signalbox_curri_requests_total{decision="permit",policy="default"} 1
signalbox_curri_requests_total{decision="permit",policy="lobby"} 0
signalbox_curri_errors_total{reason="unknown_policy"} 1
signalbox_curri_errors_total{reason="malformed"} 2`), "\n") {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if strings.Contains(m, "ghost") {
		t.Errorf("unknown policy names leaked into labels:\n%s", m)
	}
	// A second handler on the same registry must fail loudly, not panic.
	if _, err := NewHandler(HandlerConfig{Decider: testDecider(), Registerer: env.reg}); err == nil {
		t.Error("duplicate metric registration accepted")
	}
	if _, err := NewHandler(HandlerConfig{}); err == nil {
		t.Error("nil Decider accepted")
	}
}

func TestUnknownPolicyLogBounded(t *testing.T) {
	env := newTestEnv(t, 0)
	hello := readRequest(t, "cisco_hello_world.xml")
	for range 5 {
		env.do("POST", "/curri/ghost", hello)
	}
	if n := env.logs.count("policy=ghost"); n != 1 {
		t.Errorf("ghost logged %d times in a minute, want 1", n)
	}
	for i := range 3 * maxLoggedNames {
		env.do("POST", fmt.Sprintf("/curri/ghost-%d", i), hello)
	}
	env.h.logMu.Lock()
	remembered := len(env.h.lastLogged)
	env.h.logMu.Unlock()
	if remembered > maxLoggedNames {
		t.Errorf("remembers %d names, cap %d", remembered, maxLoggedNames)
	}
	if n := env.logs.count("unknown polic"); n > maxLoggedNames+1 {
		t.Errorf("%d warnings for %d names in a minute", n, 3*maxLoggedNames)
	}
	if n := env.logs.count("further names suppressed"); n != 1 {
		t.Errorf("overflow summary logged %d times, want 1", n)
	}
}

// scrape renders the registry in the text exposition format.
func scrape(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// fakeWriter is a minimal http.ResponseWriter for the benchmark.
type fakeWriter struct {
	h      http.Header
	status int
	n      int
}

func (f *fakeWriter) Header() http.Header         { return f.h }
func (f *fakeWriter) WriteHeader(code int)        { f.status = code }
func (f *fakeWriter) Write(b []byte) (int, error) { f.n += len(b); return len(b), nil }
func (f *fakeWriter) Flush()                      {}

// resettableBody is a request body that can be rewound between iterations.
type resettableBody struct{ bytes.Reader }

func (*resettableBody) Close() error { return nil }

func BenchmarkHandler(b *testing.B) {
	body := readRequest(b, "cisco_hello_world.xml")
	for _, bc := range []struct{ name, path string }{
		{"permit_modify", "/curri"},
		{"divert", "/curri/lobby"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := newTestEnv(b, 0)
			env.h.onDecision = func(*Event) {}
			rb := &resettableBody{}
			req := httptest.NewRequest("POST", bc.path, nil)
			req.Body = rb
			req.ContentLength = int64(len(body))
			w := &fakeWriter{h: make(http.Header, 4)}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rb.Reset(body)
				clear(w.h)
				env.h.ServeHTTP(w, req)
				if w.status != 200 {
					b.Fatal(w.status)
				}
			}
		})
	}
	_ = io.EOF
}

// A new CUCM release's attributes are counted (bounded labels) and logged
// once per id; anonymous callers are counted and decided, not refused.
func TestHandlerCountsUnknownAttributesAndAnonymousCalls(t *testing.T) {
	env := newTestEnv(t, 0)
	hello := string(readRequest(t, "cisco_hello_world.xml"))
	withAttr := strings.Replace(hello, "</Subject>", `<Attribute AttributeId="urn:Cisco:uc:1.0:callingpartyname"><AttributeValue>Alice</AttributeValue></Attribute></Subject>`, 1)
	for range 3 {
		if rec := env.do("POST", "/curri", []byte(withAttr)); !strings.Contains(rec.Body.String(), "<Decision>Permit</Decision>") {
			t.Fatalf("body %s", rec.Body)
		}
	}
	for i := range maxAttrLabels + 5 {
		env.do("POST", "/curri", []byte(strings.Replace(hello, "</Subject>",
			fmt.Sprintf(`<Attribute AttributeId="urn:Cisco:uc:1.0:future%d"><AttributeValue>x</AttributeValue></Attribute></Subject>`, i), 1)))
	}
	anon := strings.Replace(hello, "<AttributeValue>9725550101</AttributeValue>", "<AttributeValue></AttributeValue>", 1)
	anon = strings.Replace(anon, "<AttributeValue>+19725550101</AttributeValue>", "<AttributeValue/>", 1)
	rec := env.do("POST", "/curri", []byte(anon))
	if !strings.Contains(rec.Body.String(), "<Decision>Permit</Decision>") {
		t.Fatalf("anonymous call: %s", rec.Body)
	}
	if ev := env.events[len(env.events)-1]; ev.Indeterminate || ev.Call.Calling != "" || ev.Call.Called != "50102" {
		t.Errorf("anonymous call event %+v", ev)
	}
	m := scrape(t, env.reg)
	for _, want := range []string{
		`signalbox_curri_unknown_attributes_total{attribute="callingpartyname"} 3`,
		`signalbox_curri_unknown_attributes_total{attribute="_other"} 6`,
		"signalbox_curri_anonymous_calls_total 1",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := env.logs.count("callingpartyname"); n != 1 {
		t.Errorf("%d log lines name callingpartyname, want 1", n)
	}
	if n := strings.Count(m, "signalbox_curri_unknown_attributes_total{"); n != maxAttrLabels+1 {
		t.Errorf("%d attribute labels, want %d", n, maxAttrLabels+1)
	}
}
