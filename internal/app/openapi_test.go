package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/api"
	"github.com/signalbox/signalbox/internal/platform/signin"
	"github.com/signalbox/signalbox/internal/testkit/oidcop"
	"github.com/signalbox/signalbox/internal/testkit/ports"
)

// The OpenAPI document served at /api/v1/openapi.json is held to the API:
//   - it is a valid OpenAPI 3.1 document (against the OpenAPI Initiative's
//     schema of 3.1 documents), and every schema in it a valid JSON Schema
//     (apiContract, openapi_check_test.go);
//   - it documents exactly the routes the router serves;
//   - a scenario that calls every documented operation on a running serve
//     (director on, a CUCM call logged) sends every request-body example of
//     the document, and every request and every answer, errors included, is
//     valid against the document.
func TestOpenAPIContract(t *testing.T) {
	t.Parallel()
	raw, err := api.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	v, err := newAPIContract(raw)
	if err != nil {
		t.Fatalf("document: %v", err)
	}

	var tree struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range tree.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head":
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range append(api.Routes(), signin.APIRoutes()...) {
		served[r] = true
		if !documented[r] {
			t.Errorf("route %s is served but not documented", r)
		}
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("%s is documented but not served", op)
		}
	}

	cfg := testConfig(t, t.TempDir(), true)
	cfg.KafkaTopics = "SCP=2,NRF=1,SEPP=1,PCF=1,BSF=1,NON_ORACLE=1" // every NF type the examples name
	cfg.CallsTopic = "CALLS"
	// Sign-in through a provider, for the /auth routes: serve's port is
	// named in the redirect URL, so reserved before it listens.
	cfg.HTTPAddr = ports.Reserve(t, "127.0.35.1")
	op := oidcop.Start(t, []oidcop.User{{ID: "u-ada", Username: "ada", Password: "pw", Email: "ada@example.net", Groups: []string{"noc"}}},
		[]oidcop.Client{{ID: "sbx", Secret: "sbx-secret", RedirectURI: "http://" + cfg.HTTPAddr + "/auth/callback"}}, oidcop.Options{})
	cfg.OIDCIssuer, cfg.OIDCClientID, cfg.OIDCClientSecret = op.Issuer, "sbx", "sbx-secret"
	cfg.OIDCRedirectURL, cfg.OIDCViewerGroups, cfg.OIDCSessionMaxAge = "http://"+cfg.HTTPAddr+"/auth/callback", "noc", time.Hour
	cfg.OIDCScopes, cfg.OIDCRolesClaim = "openid,profile", "groups"
	s := startServer(t, cfg)
	defer s.Shutdown()
	base := "http://" + s.HTTPAddr()

	// A call in the log, for GET /calls.
	c := dialCUCM(t, s.CURRIAddr())
	if _, body := c.do("POST", "/curri/default", xacmlRequest("9725550101", "4085550199")); decisionOf(t, body) == "" {
		t.Fatalf("CURRI: %s", body)
	}

	sc := &scenario{t: t, v: v, raw: raw, base: base, token: cfg.AdminToken,
		exercised: map[string]bool{}, examplesSent: map[string]bool{}}
	ids := map[string]string{}
	idOf := func(r []byte) string {
		var x struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(r, &x)
		if f, ok := x.ID.(float64); ok {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		return fmt.Sprint(x.ID)
	}
	firstEntry := func(r []byte) string {
		var x struct {
			Entries []struct {
				ID json.Number `json:"id"`
			} `json:"entries"`
		}
		_ = json.Unmarshal(r, &x)
		if len(x.Entries) == 0 {
			t.Fatalf("no entries in %s", r)
		}
		return x.Entries[0].ID.String()
	}

	// No token: 401, as documented.
	sc.call(step{op: "GET /api/v1/version", path: "/api/v1/version", noToken: true, want: 401})
	sc.call(step{op: "GET /api/v1/openapi.json", path: "/api/v1/openapi.json", noToken: true, want: 200, same: raw})
	sc.call(step{op: "GET /api/v1/version", path: "/api/v1/version", want: 200})

	// Sign-in: a person's session, then its end.
	sc.call(step{op: "GET /auth/info", path: "/auth/info", noToken: true, want: 200})
	sc.call(step{op: "GET /auth/session", path: "/auth/session", noToken: true, want: 401})
	browser, _, _, err := op.SignIn(base+"/auth/login", "ada", "pw")
	if err != nil {
		t.Fatal(err)
	}
	var cookie *http.Cookie
	for _, c := range browser.Jar.Cookies(&url.URL{Scheme: "http", Host: cfg.HTTPAddr, Path: "/"}) {
		if c.Name == signin.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie after signing in")
	}
	var se struct{ CSRF string }
	_ = json.Unmarshal(sc.call(step{op: "GET /auth/session", path: "/auth/session", noToken: true, cookie: cookie, want: 200}), &se)
	sc.call(step{op: "POST /auth/logout", path: "/auth/logout", noToken: true, noBody: true, cookie: cookie, want: 403})
	sc.call(step{op: "POST /auth/logout", path: "/auth/logout", noToken: true, noBody: true, cookie: cookie, csrf: se.CSRF, want: 204})
	sc.call(step{op: "POST /auth/logout", path: "/auth/logout", noToken: true, noBody: true, cookie: cookie, csrf: se.CSRF, want: 401})

	// Call policy.
	sc.call(step{op: "POST /api/v1/policies", path: "/api/v1/policies", want: 201})
	sc.call(step{op: "POST /api/v1/policies", path: "/api/v1/policies", want: 409})
	sc.call(step{op: "GET /api/v1/policies", path: "/api/v1/policies", want: 200})
	sc.call(step{op: "GET /api/v1/policies/{id}", path: "/api/v1/policies/branch", want: 200})
	sc.call(step{op: "GET /api/v1/policies/{id}", path: "/api/v1/policies/nosuch", want: 404})
	sc.call(step{op: "PUT /api/v1/policies/{id}", path: "/api/v1/policies/branch", want: 200})
	sc.call(step{op: "PATCH /api/v1/policies/{id}", path: "/api/v1/policies/branch", ctype: "application/merge-patch+json", want: 200})
	sc.call(step{op: "PATCH /api/v1/policies/{id}", path: "/api/v1/policies/branch", body: `{"id":"other"}`, want: 400})
	sc.call(step{op: "PUT /api/v1/policies/{id}/rules", path: "/api/v1/policies/branch/rules", want: 200})
	ids["rule"] = idOf(sc.call(step{op: "POST /api/v1/policies/{id}/rules", path: "/api/v1/policies/branch/rules", want: 201}))
	sc.call(step{op: "POST /api/v1/policies/{id}/rules", path: "/api/v1/policies/branch/rules", body: `{"match":{"calling":"+1[2-"},"action":{"decision":"permit"}}`, want: 400})
	sc.call(step{op: "GET /api/v1/policies/{id}/rules", path: "/api/v1/policies/branch/rules", want: 200})
	sc.call(step{op: "GET /api/v1/rules/{id}", path: "/api/v1/rules/" + ids["rule"], want: 200})
	sc.call(step{op: "PUT /api/v1/rules/{id}", path: "/api/v1/rules/" + ids["rule"], want: 200})
	sc.call(step{op: "POST /api/v1/policies/{id}/lists/{list}/entries", path: "/api/v1/policies/branch/lists/block/entries", want: 201})
	sc.call(step{op: "POST /api/v1/policies/{id}/lists/{list}/entries", path: "/api/v1/policies/branch/lists/block/entries", ctype: "text/csv", want: 201})
	sc.call(step{op: "POST /api/v1/policies/{id}/lists/{list}/entries", path: "/api/v1/policies/branch/lists/block/entries", ctype: "application/xml", body: "<x/>", want: 415})
	ids["entry"] = firstEntry(sc.call(step{op: "GET /api/v1/policies/{id}/lists/{list}/entries", path: "/api/v1/policies/branch/lists/block/entries", want: 200}))
	sc.call(step{op: "GET /api/v1/policies/{id}/lists/{list}/entries", path: "/api/v1/policies/branch/lists/block/entries?format=csv", want: 200})
	sc.call(step{op: "POST /api/v1/policies/{id}/evaluate", path: "/api/v1/policies/branch/evaluate", want: 200})

	// Shared lists.
	sc.call(step{op: "POST /api/v1/lists", path: "/api/v1/lists", want: 201})
	sc.call(step{op: "GET /api/v1/lists", path: "/api/v1/lists", want: 200})
	sc.call(step{op: "GET /api/v1/lists/{id}", path: "/api/v1/lists/vip", want: 200})
	sc.call(step{op: "PUT /api/v1/lists/{id}", path: "/api/v1/lists/vip", want: 200})
	sc.call(step{op: "POST /api/v1/lists/{id}/entries", path: "/api/v1/lists/vip/entries", want: 201})
	sc.call(step{op: "POST /api/v1/lists/{id}/entries", path: "/api/v1/lists/vip/entries", ctype: "text/csv", want: 201})
	ids["shared_entry"] = firstEntry(sc.call(step{op: "GET /api/v1/lists/{id}/entries", path: "/api/v1/lists/vip/entries?q=CEO", want: 200}))

	// Directories.
	sc.call(step{op: "POST /api/v1/directories", path: "/api/v1/directories", want: 201})
	sc.call(step{op: "GET /api/v1/directories", path: "/api/v1/directories", want: 200})
	sc.call(step{op: "GET /api/v1/directories/{id}", path: "/api/v1/directories/corp", want: 200})
	sc.call(step{op: "PUT /api/v1/directories/{id}", path: "/api/v1/directories/corp", want: 200})
	sc.call(step{op: "PUT /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries", ctype: "text/csv", want: 200})
	sc.call(step{op: "POST /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries", want: 200})
	sc.call(step{op: "POST /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries", ctype: "text/csv", want: 200})
	sc.call(step{op: "GET /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries?number=%2B1972&limit=10", want: 200})
	sc.call(step{op: "GET /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries?format=csv", want: 200})
	sc.call(step{op: "GET /api/v1/directories/{id}/entries", path: "/api/v1/directories/corp/entries?limit=0", want: 400})

	// Calls.
	sc.call(step{op: "GET /api/v1/calls", path: "/api/v1/calls?since=-1h&limit=10", want: 200})
	sc.call(step{op: "GET /api/v1/calls", path: "/api/v1/calls?decision=maybe", want: 400})
	sc.call(step{op: "GET /api/v1/calls/stream", path: "/api/v1/calls/stream?limit=10", want: 200})

	// Director.
	sc.call(step{op: "POST /api/v1/feeds", path: "/api/v1/feeds", example: "synthetic", want: 201})
	sc.call(step{op: "POST /api/v1/feeds", path: "/api/v1/feeds", example: "xdr", want: 201})
	sc.call(step{op: "POST /api/v1/feeds", path: "/api/v1/feeds", body: `{"name":"bad","type":"http2","sources":["SCP"],"url":"http://x","filter":"status >="}`, want: 400})
	sc.call(step{op: "GET /api/v1/feeds", path: "/api/v1/feeds", want: 200})
	sc.call(step{op: "GET /api/v1/feeds/{name}", path: "/api/v1/feeds/probe-a", want: 200})
	sc.call(step{op: "PUT /api/v1/feeds/{name}", path: "/api/v1/feeds/probe-a", want: 200})
	sc.call(step{op: "GET /api/v1/feeds/{name}/status", path: "/api/v1/feeds/probe-a/status", want: 200})
	// A node without a site pair (TestSiteTakeoverTrafficAtBothSites reads a pair's state).
	sc.call(step{op: "GET /api/v1/site", path: "/api/v1/site", want: 404})
	sc.call(step{op: "GET /api/v1/feeds/{name}/records", path: "/api/v1/feeds/transactions/records?limit=10", want: 200, retryFor: 5 * time.Second})
	// The xdr feed's topic is in the embedded broker: its consumers get a
	// credential; a synthetic feed has no topic to read.
	sc.call(step{op: "POST /api/v1/feeds/{name}/credential", path: "/api/v1/feeds/transactions/credential", noBody: true, want: 201})
	sc.call(step{op: "POST /api/v1/feeds/{name}/credential", path: "/api/v1/feeds/probe-a/credential", noBody: true, want: 409})
	sc.call(step{op: "DELETE /api/v1/feeds/{name}/credential", path: "/api/v1/feeds/transactions/credential", want: 204})
	sc.call(step{op: "DELETE /api/v1/feeds/{name}/credential", path: "/api/v1/feeds/transactions/credential", want: 404})
	sc.call(step{op: "GET /api/v1/export", path: "/api/v1/export?format=pcap&sources=SCP,SEPP&filter=status%20%3E%3D%20400", want: 200})
	sc.call(step{op: "GET /api/v1/export", path: "/api/v1/export?format=jsonl&sources=NRF", want: 200})
	sc.call(step{op: "GET /api/v1/capture", path: "/api/v1/capture?sources=SCP&duration=1s", want: 200})
	sc.call(step{op: "GET /api/v1/capture", path: "/api/v1/capture?filter=status%20%3E%3D", want: 400})

	// Operations.
	sc.call(step{op: "GET /api/v1/alarms", path: "/api/v1/alarms?limit=10", want: 200})
	sc.call(step{op: "GET /api/v1/stats", path: "/api/v1/stats", want: 200})
	sc.call(step{op: "POST /api/v1/tokens", path: "/api/v1/tokens", want: 201})
	ids["token"] = idOf(sc.last)
	var viewer struct{ Token string }
	_ = json.Unmarshal(sc.last, &viewer)
	sc.call(step{op: "GET /api/v1/tokens", path: "/api/v1/tokens", want: 200})
	sc.call(step{op: "GET /api/v1/tokens", path: "/api/v1/tokens", as: viewer.Token, want: 403})
	sc.call(step{op: "POST /api/v1/webhooks", path: "/api/v1/webhooks", want: 201})
	sc.call(step{op: "GET /api/v1/webhooks", path: "/api/v1/webhooks", want: 200})
	sc.call(step{op: "GET /api/v1/webhooks/{name}", path: "/api/v1/webhooks/noc", want: 200})
	sc.call(step{op: "PUT /api/v1/webhooks/{name}", path: "/api/v1/webhooks/noc", want: 200})
	sc.call(step{op: "POST /api/v1/webhooks/{name}/test", path: "/api/v1/webhooks/noc/test", noBody: true, want: 200})
	sc.call(step{op: "DELETE /api/v1/webhooks/{name}", path: "/api/v1/webhooks/noc", want: 204})
	sc.call(step{op: "GET /api/v1/xdrs", path: "/api/v1/xdrs?supi=234300000000001&since=-1h&limit=10", want: 200})
	sc.call(step{op: "GET /api/v1/xdrs", path: "/api/v1/xdrs?color=red", want: 400})
	sc.call(step{op: "GET /api/v1/xdrs/pcap", path: "/api/v1/xdrs/pcap?supi=234300000000001&since=-1h", want: 404})
	sc.call(step{op: "GET /api/v1/xdrs/pcap", path: "/api/v1/xdrs/pcap?supi=234300000000001&limit=10", want: 400})
	sc.call(step{op: "POST /api/v1/traces", path: "/api/v1/traces", want: 201})
	ids["trace"] = idOf(sc.last)
	sc.call(step{op: "GET /api/v1/traces", path: "/api/v1/traces", want: 200})
	sc.call(step{op: "GET /api/v1/traces/{id}", path: "/api/v1/traces/" + ids["trace"], want: 200})
	sc.call(step{op: "GET /api/v1/traces/{id}/pcap", path: "/api/v1/traces/" + ids["trace"] + "/pcap", want: 200})
	sc.call(step{op: "GET /api/v1/traces/{id}/jsonl", path: "/api/v1/traces/" + ids["trace"] + "/jsonl", want: 200})
	sc.call(step{op: "DELETE /api/v1/traces/{id}", path: "/api/v1/traces/" + ids["trace"], want: 200})
	sc.call(step{op: "GET /api/v1/traces", path: "/api/v1/traces", as: viewer.Token, want: 403})
	sc.call(step{op: "GET /api/v1/audit", path: "/api/v1/audit?since=-1h&resource=policies", want: 200})

	// And undone.
	sc.call(step{op: "DELETE /api/v1/tokens/{id}", path: "/api/v1/tokens/" + ids["token"], want: 204})
	sc.call(step{op: "DELETE /api/v1/feeds/{name}", path: "/api/v1/feeds/probe-a", want: 204})
	sc.call(step{op: "DELETE /api/v1/feeds/{name}", path: "/api/v1/feeds/transactions", want: 204})
	sc.call(step{op: "DELETE /api/v1/directories/{id}/entries/{number}", path: "/api/v1/directories/corp/entries/%2B1972555?match=prefix", want: 204})
	sc.call(step{op: "DELETE /api/v1/directories/{id}", path: "/api/v1/directories/corp", want: 204})
	sc.call(step{op: "DELETE /api/v1/lists/{id}/entries/{entry}", path: "/api/v1/lists/vip/entries/" + ids["shared_entry"], want: 204})
	sc.call(step{op: "DELETE /api/v1/lists/{id}", path: "/api/v1/lists/vip", want: 204})
	sc.call(step{op: "DELETE /api/v1/policies/{id}/lists/{list}/entries/{entry}", path: "/api/v1/policies/branch/lists/block/entries/" + ids["entry"], want: 204})
	sc.call(step{op: "DELETE /api/v1/rules/{id}", path: "/api/v1/rules/" + ids["rule"], want: 204})
	sc.call(step{op: "DELETE /api/v1/policies/{id}", path: "/api/v1/policies/branch", want: 204})

	var missing []string
	for op := range documented {
		if !sc.exercised[op] {
			missing = append(missing, op)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented operations the scenario never called: %s", strings.Join(missing, ", "))
	}
	for _, ex := range sc.examples() {
		if !sc.examplesSent[ex] {
			t.Errorf("request example %s was never sent", ex)
		}
	}
}

type step struct {
	op       string // "METHOD /documented/path"
	path     string // the request's path and query
	ctype    string // the body's media type; application/json by default
	example  string // a named example of the operation (examples), else its example
	body     string // a body of the test's own instead of the document's example
	noToken  bool
	cookie   *http.Cookie // a sign-in session's
	csrf     string       // X-CSRF-Token
	noBody   bool         // a POST without a body (the operation takes none)
	as       string       // another bearer token
	want     int
	same     []byte        // the answer must be exactly this
	retryFor time.Duration // retry a different status for this long (state that settles)
}

type scenario struct {
	t            *testing.T
	v            *apiContract
	raw          []byte
	base, token  string
	exercised    map[string]bool
	examplesSent map[string]bool
	last         []byte
}

// example finds a request-body example in the document: operation op, media
// type ctype, named (examples.<name>.value) or not (example). JSON examples
// come back as JSON; strings (CSV) as they are.
func (sc *scenario) example(op, ctype, name string) ([]byte, string, bool) {
	method, path, _ := strings.Cut(op, " ")
	var tree map[string]any
	_ = json.Unmarshal(sc.raw, &tree)
	get := func(m any, keys ...string) any {
		for _, k := range keys {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil
			}
			m = mm[k]
		}
		return m
	}
	content := get(tree, "paths", path, strings.ToLower(method), "requestBody", "content", ctype)
	var v any
	key := op + " " + ctype
	if name != "" {
		v = get(content, "examples", name, "value")
		key += " " + name
	} else {
		v = get(content, "example")
	}
	if v == nil {
		return nil, key, false
	}
	if s, ok := v.(string); ok && ctype != "application/json" {
		return []byte(s), key, true
	}
	b, _ := json.Marshal(v)
	return b, key, true
}

// examples lists every request-body example of the document.
func (sc *scenario) examples() []string {
	var tree struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Example  any            `json:"example"`
					Examples map[string]any `json:"examples"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	_ = json.Unmarshal(sc.raw, &tree)
	var out []string
	for path, item := range tree.Paths {
		for method, op := range item {
			for ct, c := range op.RequestBody.Content {
				key := strings.ToUpper(method) + " " + path + " " + ct
				if c.Example != nil {
					out = append(out, key)
				}
				for name := range c.Examples {
					out = append(out, key+" "+name)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

func (sc *scenario) call(s step) []byte {
	t := sc.t
	t.Helper()
	method, _, _ := strings.Cut(s.op, " ")
	// The request's path must be the operation's.
	pattern := strings.ReplaceAll(regexp.QuoteMeta(pathParam.ReplaceAllString(strings.SplitN(s.op, " ", 2)[1], "\x00")), "\x00", `[^/]+`)
	if !regexp.MustCompile("^" + pattern + "$").MatchString(strings.Split(s.path, "?")[0]) {
		t.Fatalf("step %s: path %s is not the operation's", s.op, s.path)
	}
	ctype := s.ctype
	if ctype == "" {
		ctype = "application/json"
	}
	var body []byte
	if s.body != "" {
		body = []byte(s.body)
	} else if (method == "POST" || method == "PUT" || method == "PATCH") && !s.noBody {
		b, key, ok := sc.example(s.op, ctype, s.example)
		if !ok {
			t.Fatalf("step %s: the document has no %s example %q", s.op, ctype, s.example)
		}
		body = b
		sc.examplesSent[key] = true
	}
	deadline := time.Now().Add(s.retryFor)
	for {
		req, resp, respBody := sc.do(method, s.path, ctype, body, s)
		if resp.StatusCode != s.want && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		sc.exercised[s.op] = true
		if resp.StatusCode != s.want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, s.path, resp.StatusCode, s.want, respBody)
		}
		if s.same != nil && !bytes.Equal(respBody, s.same) {
			t.Errorf("%s %s: the answer is not the document", method, s.path)
		}
		// A request the test makes wrong on purpose (no token, a bad
		// body) is not valid; its answer must be.
		var errs []string
		if s.want < 300 {
			errs = sc.v.checkRequest(req, body)
		}
		errs = append(errs, sc.v.checkResponse(req, resp.StatusCode, resp.Header, respBody)...)
		for _, e := range errs {
			t.Errorf("%s %s (%d): %s", method, s.path, resp.StatusCode, e)
		}
		if len(errs) > 0 {
			t.Logf("request: %s\nanswer: %s", body, truncate(respBody))
		}
		sc.last = respBody
		return respBody
	}
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

func (sc *scenario) do(method, path, ctype string, body []byte, s step) (*http.Request, *http.Response, []byte) {
	t := sc.t
	t.Helper()
	newReq := func() *http.Request {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequest(method, sc.base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", ctype)
		}
		if s.cookie != nil {
			req.AddCookie(s.cookie)
		}
		if s.csrf != "" {
			req.Header.Set("X-CSRF-Token", s.csrf)
		}
		switch {
		case s.noToken:
		case s.as != "":
			req.Header.Set("Authorization", "Bearer "+s.as)
		default:
			req.Header.Set("Authorization", "Bearer "+sc.token)
		}
		return req
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The validator reads the request again: a fresh one with the same body.
	return newReq(), resp, b
}
