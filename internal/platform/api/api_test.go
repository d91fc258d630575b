package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/livepolicy"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const adminToken = "test-admin-secret"

// env is one API over a real SQLite store, a real compiled policy engine
// and a small feed runtime.
type env struct {
	t      testing.TB
	st     store.Store
	srv    *httptest.Server
	engine *callpolicy.Engine
	live   *livepolicy.Manager
	feeds  *testFeeds
	reg    *prometheus.Registry

	mu      sync.Mutex
	changes []string
}

func newEnv(t testing.TB) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv with the API's Config changed by mod first.
func newEnvWith(t testing.TB, mod func(e *env, c *Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DSN: "sqlite", DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, st: st, reg: prometheus.NewRegistry()}
	e.engine = callpolicy.NewEngine(prometheus.NewRegistry())
	e.feeds = &testFeeds{st: st, running: map[string]bool{}, storedAtPrepare: map[string]bool{}}
	e.recompile()
	cfg := Config{
		Store:      st,
		Policies:   e.engine,
		Feeds:      e.feeds,
		OnChange:   e.onChange,
		AdminToken: adminToken,
		Registerer: e.reg,
		Version:    "test-1.0",
	}
	if mod != nil {
		mod(e, &cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// onChange does what the app does: rebuild the snapshot from the store.
func (e *env) onChange(what string) {
	e.mu.Lock()
	e.changes = append(e.changes, what)
	e.mu.Unlock()
	switch what {
	case ChangedPolicies:
		e.recompile()
	case ChangedFeeds:
		e.feeds.sync(context.Background())
	case ChangedWebhooks, ChangedTraces:
	default:
		e.t.Errorf("OnChange(%q): unknown change", what)
	}
}

func (e *env) recompile() {
	if e.live == nil {
		e.live = livepolicy.New(livepolicy.Config{Engine: e.engine, Store: e.st})
	}
	if err := e.live.Load(context.Background()); err != nil {
		e.t.Errorf("load policies: %v", err)
	}
}

func (e *env) now() time.Time { return time.Now() }

func (e *env) changeCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.changes)
}

func (e *env) configVersion() int64 {
	v, err := e.st.ConfigVersion(context.Background())
	if err != nil {
		e.t.Fatalf("config version: %v", err)
	}
	return v
}

// resp is an answer with its body read.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) errBody(t *testing.T) errorBody {
	t.Helper()
	var eb errorBody
	if err := json.Unmarshal(r.Body, &eb); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.Body, err)
	}
	return eb
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

// req sends a request; body is JSON unless contentType says otherwise.
func (e *env) req(method, path, token, contentType, body string) resp {
	e.t.Helper()
	h := map[string]string{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if body != "" {
		if contentType == "" {
			contentType = "application/json"
		}
		h["Content-Type"] = contentType
	}
	return e.reqH(method, path, h, body)
}

// reqH sends a request with exactly the given headers.
func (e *env) reqH(method, path string, headers map[string]string, body string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// admin sends a JSON request with the admin token.
func (e *env) admin(method, path, body string) resp {
	e.t.Helper()
	return e.req(method, path, adminToken, "", body)
}

// must sends an admin JSON request and fails unless the status is want.
func (e *env) must(want int, method, path, body string) resp {
	e.t.Helper()
	r := e.admin(method, path, body)
	if r.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// testFeeds is a small feed runtime: it validates what the API must refuse,
// records Prepare, and "runs" the stored feeds after OnChange.
type testFeeds struct {
	st store.Store

	mu              sync.Mutex
	prepared        []string
	storedAtPrepare map[string]bool
	running         map[string]bool
}

func (f *testFeeds) Validate(spec *director.FeedSpec) error {
	if len(spec.Sources) == 0 {
		return &director.FieldError{Field: "sources", Msg: "at least one NF type is required"}
	}
	switch spec.Type {
	case director.TypeSynthetic:
		if _, _, err := net.SplitHostPort(spec.Endpoint); err != nil {
			return &director.FieldError{Field: "endpoint", Msg: "want host:port: " + err.Error()}
		}
	case director.TypeHTTP2:
		u, err := url.Parse(spec.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return &director.FieldError{Field: "url", Msg: "want an http or https URL"}
		}
	case director.TypeKafka:
		if spec.Topic == "" {
			return &director.FieldError{Field: "topic", Msg: "required"}
		}
	default:
		return &director.FieldError{Field: "type", Msg: "want synthetic, http2 or kafka"}
	}
	return nil
}

func (f *testFeeds) Prepare(ctx context.Context, spec *director.FeedSpec) error {
	_, err := f.st.GetFeed(ctx, spec.Name)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared = append(f.prepared, spec.Name)
	f.storedAtPrepare[spec.Name] = err == nil
	return nil
}

func (f *testFeeds) Status(name string) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running[name] {
		return nil, false
	}
	return map[string]any{"state": "running", "delivered": 0}, true
}

func (f *testFeeds) sync(ctx context.Context) {
	recs, err := f.st.ListFeeds(ctx)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = map[string]bool{}
	for _, r := range recs {
		f.running[r.Name] = true
	}
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestNewRequiresStore(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a store: no error")
	}
}

func TestNewRefusesDuplicateMetrics(t *testing.T) {
	e := newEnv(t)
	if _, err := New(Config{Store: e.st, Registerer: e.reg}); err == nil {
		t.Fatal("second New on the same registry: no error")
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	var v versionInfo
	e.must(200, "GET", "/api/v1/version", "").decode(t, &v)
	if v.Version != "test-1.0" || v.Store != "sqlite" || v.Go == "" || v.ConfigVersion < 1 {
		t.Errorf("version = %+v", v)
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	if r := e.admin("GET", "/api/v1/nothing", ""); r.Status != 404 {
		t.Errorf("status %d, want 404", r.Status)
	}
	if r := e.admin("PATCH", "/api/v1/policies", `{}`); r.Status != 405 {
		t.Errorf("PATCH policies: status %d, want 405", r.Status)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.must(200, "GET", "/api/v1/policies", "")
	e.must(404, "GET", "/api/v1/policies/nope", "")
	e.req("GET", "/api/v1/policies", "", "", "")
	e.admin("GET", "/api/v1/unknown/route", "")
	want := map[[2]string]float64{
		{"GET /api/v1/policies", "200"}:      1,
		{"GET /api/v1/policies", "401"}:      1,
		{"GET /api/v1/policies/{id}", "404"}: 1,
		{"unmatched", "404"}:                 1,
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "signalbox_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					k[0] = l.GetValue()
				case "code":
					k[1] = l.GetValue()
				}
			}
			got[k] = m.GetCounter().GetValue()
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("requests{route=%q,code=%q} = %v, want %v (all: %v)", k[0], k[1], got[k], v, got)
		}
	}
}

func TestStoreErrorsAre500WithoutDetail(t *testing.T) {
	e := newEnv(t)
	// A closed store fails every query: the client gets a generic 500.
	e.st.Close()
	r := e.admin("GET", "/api/v1/policies/default/rules", "")
	if r.Status != 500 {
		t.Fatalf("status %d, want 500; body %s", r.Status, r.Body)
	}
	if eb := r.errBody(t); strings.Contains(eb.Error, "sql") {
		t.Errorf("500 leaks internals: %q", eb.Error)
	}
}

func TestErrorMapping(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		err    error
		status int
		field  string
	}{
		{&callpolicy.FieldError{Field: "match.called", Msg: "bad"}, 400, "match.called"},
		{&director.FieldError{Field: "url", Msg: "bad"}, 400, "url"},
		{errors.Join(errors.New("x"), store.ErrNotFound), 404, ""},
		{store.ErrConflict, 409, ""},
		{&http.MaxBytesError{Limit: 10}, 413, ""},
		{errors.New("boom"), 500, ""},
	}
	_ = e
	s := &server{log: testkit.Logger()}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.fail(rec, httptest.NewRequest("GET", "/", nil), c.err)
		if rec.Code != c.status {
			t.Errorf("%v: status %d, want %d", c.err, rec.Code, c.status)
		}
		var eb errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Field != c.field || eb.Error == "" {
			t.Errorf("%v: body %s (field want %q)", c.err, rec.Body, c.field)
		}
	}
}
