package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/oauth2"

	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit/oidcop"
	"github.com/signalbox/signalbox/internal/testkit/pki"
)

var people = []oidcop.User{
	{ID: "u-ada", Username: "ada", Password: "pw-ada", First: "Ada", Last: "L", Email: "ada@example.net", Groups: []string{"staff", "noc-admins"}},
	{ID: "u-bob", Username: "bob", Password: "pw-bob", First: "Bob", Last: "M", Email: "bob@example.net", Groups: []string{"noc"}},
	{ID: "u-eve", Username: "eve", Password: "pw-eve", First: "Eve", Last: "N", Email: "eve@example.net", Groups: []string{"sales"}},
}

type fixture struct {
	t   *testing.T
	op  *oidcop.Provider
	svc *Service
	st  store.Store
	url string // signalbox's base URL
	reg *prometheus.Registry
}

func start(t *testing.T, o oidcop.Options, change func(*Config)) *fixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	op := oidcop.Start(t, people, []oidcop.Client{
		{ID: "signalbox", Secret: "s3cret", RedirectURI: base + CallbackPath},
		{ID: "other-app", Secret: "other", RedirectURI: base + CallbackPath},
	}, o)
	st, err := store.Open(context.Background(), store.Options{DSN: "sqlite", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	cfg := Config{Issuer: op.Issuer, ClientID: "signalbox", ClientSecret: "s3cret", RedirectURL: base + CallbackPath,
		Scopes: []string{"openid", "profile", "email"}, AdminGroups: []string{"noc-admins"}, ViewerGroups: []string{"noc"},
		Store: st, Registerer: reg}
	if change != nil {
		change(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/auth/", svc)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console") })
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &fixture{t: t, op: op, svc: svc, st: st, url: base, reg: reg}
}

// signIn walks the flow as a browser does (oidcop.Provider.SignIn).
func (f *fixture) signIn(user, password string) (*http.Response, string, *http.Client) {
	f.t.Helper()
	c, resp, body, err := f.op.SignIn(f.url+"/auth/login", user, password)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, body, c
}

func readAll(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) session(c *http.Client) (int, map[string]any) {
	f.t.Helper()
	resp, err := c.Get(f.url + "/auth/session")
	if err != nil {
		f.t.Fatal(err)
	}
	var v map[string]any
	_ = json.Unmarshal([]byte(readAll(f.t, resp)), &v)
	return resp.StatusCode, v
}

func (f *fixture) results(result string) float64 {
	return testutil.ToFloat64(f.svc.result.WithLabelValues(result))
}

func TestSignInMapsGroupsToRoles(t *testing.T) {
	for _, o := range []oidcop.Options{{}, {GroupsInUserinfoOnly: true}} {
		name := "groups in ID token"
		if o.GroupsInUserinfoOnly {
			name = "groups from userinfo"
		}
		t.Run(name, func(t *testing.T) {
			f := start(t, o, nil)
			for _, c := range []struct{ user, role string }{{"ada", "admin"}, {"bob", "viewer"}} {
				resp, body, client := f.signIn(c.user, "pw-"+c.user)
				if resp.StatusCode != 200 || body != "console" {
					t.Fatalf("%s: sign-in ended at %s: %d %q", c.user, resp.Request.URL, resp.StatusCode, body)
				}
				var cookie *http.Cookie
				for _, ck := range resp.Request.Response.Cookies() {
					if ck.Name == SessionCookie {
						cookie = ck
					}
				}
				if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure {
					t.Fatalf("%s: session cookie %+v: want HttpOnly, SameSite=Lax (not Secure on http)", c.user, cookie)
				}
				code, se := f.session(client)
				if code != 200 || se["role"] != c.role || se["name"] != c.user || se["csrf"] == "" {
					t.Fatalf("%s: /auth/session = %d %v, want role %s", c.user, code, se, c.role)
				}
				// Sign-out needs the CSRF token, then the session is gone.
				req, _ := http.NewRequest("POST", f.url+"/auth/logout", nil)
				if r, _ := client.Do(req); r.StatusCode != 403 {
					t.Errorf("logout without CSRF token: %d, want 403", r.StatusCode)
				}
				req.Header.Set("X-CSRF-Token", se["csrf"].(string))
				if r, _ := client.Do(req); r.StatusCode != 204 {
					t.Errorf("logout: %d, want 204", r.StatusCode)
				}
				// The old cookie, replayed, is no session.
				replay := httptest.NewRequest("GET", "/api/v1/version", nil)
				replay.AddCookie(cookie)
				if _, err := f.svc.Lookup(replay); err != ErrNoSession {
					t.Errorf("%s: the cookie still opens a session after sign-out: %v", c.user, err)
				}
			}
			if got := f.results("ok"); got != 2 {
				t.Errorf("signalbox_signin_total{result=ok} = %v, want 2", got)
			}
			recs, err := f.st.SearchAudit(context.Background(), store.AuditQuery{Resource: "sessions", Since: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, r := range recs {
				actions = append(actions, r.Actor+" "+r.Action+" "+r.Role+" "+r.TokenID)
			}
			want := "bob sign out viewer oidc:u-bob|bob sign in viewer oidc:u-bob|ada sign out admin oidc:u-ada|ada sign in admin oidc:u-ada"
			if strings.Join(actions, "|") != want {
				t.Errorf("audit:\n got %s\nwant %s", strings.Join(actions, "|"), want)
			}
		})
	}
}

func TestSignInRefusals(t *testing.T) {
	f := start(t, oidcop.Options{}, nil)

	// A person whose groups have no role: a page naming them, no session.
	resp, body, c := f.signIn("eve", "pw-eve")
	if resp.StatusCode != 403 || !strings.Contains(body, "eve is in no group") || !strings.Contains(body, "sales") {
		t.Errorf("unknown group: %d %s", resp.StatusCode, body)
	}
	if code, _ := f.session(c); code != 401 {
		t.Errorf("unknown group: /auth/session %d, want 401", code)
	}
	if f.results("no_role") != 1 {
		t.Error("no_role not counted")
	}

	// A callback this browser did not start: refused, whatever the code.
	jar, _ := cookiejar.New(nil)
	stranger := &http.Client{Jar: jar}
	r, err := stranger.Get(f.url + CallbackPath + "?code=abc&state=xyz")
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, r); r.StatusCode != 400 || !strings.Contains(b, "not started from this browser") {
		t.Errorf("foreign callback: %d %s", r.StatusCode, b)
	}

	// The provider says no.
	r, _ = stranger.Get(f.url + CallbackPath + "?error=access_denied&error_description=user+cancelled")
	if b := readAll(t, r); r.StatusCode != 403 || !strings.Contains(b, "access_denied: user cancelled") {
		t.Errorf("provider refusal: %d %s", r.StatusCode, b)
	}

	// An ID token made for another application (a real one, signed by the
	// provider): its audience is not signalbox.
	other := f.tokenFor(t, "other-app", "other", "ada", "pw-ada")
	if _, err := f.svc.identify(context.Background(), other.tok, other.nonce); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Errorf("ID token for another client: %v, want an audience error", err)
	}
	// signalbox's own token, with a nonce that is not this sign-in's.
	own := f.tokenFor(t, "signalbox", "s3cret", "ada", "pw-ada")
	if _, err := f.svc.identify(context.Background(), own.tok, "another-nonce"); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("replayed ID token: %v, want a nonce error", err)
	}
	if p, err := f.svc.identify(context.Background(), own.tok, own.nonce); err != nil || p.role != "admin" {
		t.Fatalf("the token itself: %+v %v", p, err)
	}
	// The same token once it has expired (the provider's tokens live an
	// hour; signalbox's clock moves two hours on).
	f.svc.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := f.svc.identify(context.Background(), own.tok, own.nonce); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired ID token: %v, want an expiry error", err)
	}
}

func TestSignInProviderDown(t *testing.T) {
	f := start(t, oidcop.Options{}, nil)
	if resp, body, _ := f.signIn("ada", "pw-ada"); resp.StatusCode != 200 {
		t.Fatalf("sign-in while the provider runs: %d %s", resp.StatusCode, body)
	}
	// Down after signalbox has discovered it: the next sign-in still gets
	// signalbox's page, not a browser's connection error.
	f.op.Close()
	resp, body, c := f.signIn("ada", "pw-ada")
	if resp.StatusCode != 503 || !strings.Contains(body, "The identity provider does not answer") || !strings.Contains(body, f.op.Issuer) {
		t.Errorf("provider down: %d %s", resp.StatusCode, body)
	}
	if code, _ := f.session(c); code != 401 {
		t.Errorf("provider down: /auth/session %d, want 401", code)
	}
	if f.results("provider_down") != 1 {
		t.Error("provider_down not counted")
	}
}

// A provider on HTTPS with a private CA: signalbox trusts it with -oidc-ca
// (Config.CAFile), and without it the sign-in page says why it cannot
// reach the provider.
func TestSignInPrivateCA(t *testing.T) {
	ca := pki.NewCA(t, "corp-sso-ca")
	caFile := ca.File(t, t.TempDir(), "sso-ca")
	f := start(t, oidcop.Options{CA: ca}, func(c *Config) { c.CAFile = caFile })
	if !strings.HasPrefix(f.op.Issuer, "https://") {
		t.Fatalf("issuer %s", f.op.Issuer)
	}
	resp, body, c := f.signIn("ada", "pw-ada")
	if resp.StatusCode != 200 || body != "console" {
		t.Fatalf("sign-in through the HTTPS provider: %d %s", resp.StatusCode, body)
	}
	if code, se := f.session(c); code != 200 || se["role"] != "admin" {
		t.Fatalf("session: %d %v", code, se)
	}

	untrusting := start(t, oidcop.Options{CA: ca}, nil)
	resp, body, _ = untrusting.signIn("ada", "pw-ada")
	if resp.StatusCode != 503 || !strings.Contains(body, "certificate") {
		t.Errorf("without the provider's CA: %d %s", resp.StatusCode, body)
	}
}

func TestSignInConfig(t *testing.T) {
	off, err := New(Config{})
	if err != nil || off.Enabled() {
		t.Fatalf("no issuer: %v %v", off, err)
	}
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, httptest.NewRequest("GET", "/auth/info", nil))
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"oidc":false}` {
		t.Errorf("/auth/info when off: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	off.ServeHTTP(rec, httptest.NewRequest("GET", "/auth/login", nil))
	if rec.Code != 404 {
		t.Errorf("/auth/login when off: %d", rec.Code)
	}
	st, _ := store.Open(context.Background(), store.Options{DSN: "sqlite", DataDir: t.TempDir()})
	defer st.Close()
	good := Config{Issuer: "https://id.example.net", ClientID: "sbx", RedirectURL: "https://sbx.example.net/auth/callback",
		ViewerGroups: []string{"noc"}, Store: st}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.ClientID = "" }, "client id"},
		{func(c *Config) { c.RedirectURL = "https://sbx.example.net/callback" }, "/auth/callback"},
		{func(c *Config) { c.ViewerGroups = nil }, "no group"},
		{func(c *Config) { c.CAFile = "/nonexistent.pem" }, "provider CA"},
	} {
		cfg := good
		c.change(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", cfg, err, c.want)
		}
	}
	s, err := New(good)
	if err != nil || !s.secure {
		t.Errorf("https redirect URL: secure cookies expected (%v)", err)
	}
}

type minted struct {
	tok   *oauth2.Token
	nonce string
}

// tokenFor runs the code flow for a client straight against the provider
// (no signalbox) and answers its token response.
func (f *fixture) tokenFor(t *testing.T, client, secret, user, password string) minted {
	t.Helper()
	_, _, oc, err := f.svc.discover(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	oc.ClientID, oc.ClientSecret = client, secret
	jar, _ := cookiejar.New(nil)
	var code string
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), f.url) {
			code = req.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	verifier, nonce := oauth2.GenerateVerifier(), random()
	resp, err := c.Get(oc.AuthCodeURL("st", oauth2.SetAuthURLParam("nonce", nonce), oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	id := resp.Request.URL.Query().Get("authRequestID")
	resp, err = c.PostForm(f.op.Issuer+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if code == "" {
		t.Fatalf("no code for %s", client)
	}
	tok, err := oc.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return minted{tok, nonce}
}

// TestSignInIssuerMismatch: an -oidc-issuer that differs from the
// provider's own only by a trailing slash is said as what it is, on the
// page, in the metric and by CheckIssuer (what serve logs at start), not
// as a provider that does not answer.
func TestSignInIssuerMismatch(t *testing.T) {
	var configured string
	f := start(t, oidcop.Options{}, func(c *Config) { c.Issuer += "/"; configured = c.Issuer })
	resp, body, _ := f.signIn("ada", "pw-ada")
	want := fmt.Sprintf("issuer mismatch: configured %q, the provider says %q", configured, f.op.Issuer)
	if resp.StatusCode != 500 || !strings.Contains(body, "Sign-in is misconfigured") || !strings.Contains(body, html.EscapeString(want)) {
		t.Errorf("a mismatched issuer: %d %s\nwant %s", resp.StatusCode, body, want)
	}
	if f.results("misconfigured") != 1 || f.results("provider_down") != 0 {
		t.Errorf("counted misconfigured %v, provider_down %v", f.results("misconfigured"), f.results("provider_down"))
	}
	var mismatch *IssuerMismatchError
	if err := f.svc.CheckIssuer(context.Background()); !errors.As(err, &mismatch) || mismatch.Provider != f.op.Issuer {
		t.Errorf("CheckIssuer: %v", err)
	}
	// Down is still down, not misconfigured.
	f.op.Close()
	if err := f.svc.CheckIssuer(context.Background()); err == nil || errors.As(err, &mismatch) {
		t.Errorf("CheckIssuer with the provider down: %v", err)
	}
}
