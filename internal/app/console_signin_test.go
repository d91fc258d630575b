package app

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/oidcop"
	"github.com/signalbox/signalbox/internal/testkit/ports"
)

// TestConsoleSignInOIDC: signalbox serve (the binary) with sign-in through
// a real OpenID Connect provider, driven in Chromium as people use it. An
// admin signs in through the provider's login form, makes a change that
// the audit log records under her name, finds that a change without the
// session's CSRF token is refused, and signs out (her cookie then opens
// nothing). A viewer sees the read-only console and is refused a change. A
// person whose groups have no role, and anyone while the provider is down,
// get a page saying so and no way in.
func TestConsoleSignInOIDC(t *testing.T) {
	t.Parallel()
	testkit.Tool(t, chromiumPath)
	dir := t.TempDir()
	// The redirect URL names serve's port: one reserved for it.
	const host = "127.0.34.1"
	httpAddr := ports.Reserve(t, host)
	base := "http://" + httpAddr
	op := oidcop.Start(t, []oidcop.User{
		{ID: "u-ada", Username: "ada", Password: "pw-ada", First: "Ada", Last: "Lovelace", Email: "ada@example.net", Groups: []string{"staff", "noc-admins"}},
		{ID: "u-bob", Username: "bob", Password: "pw-bob", First: "Bob", Last: "Marley", Email: "bob@example.net", Groups: []string{"noc"}},
		{ID: "u-eve", Username: "eve", Password: "pw-eve", First: "Eve", Last: "Smith", Email: "eve@example.net", Groups: []string{"sales"}},
	}, []oidcop.Client{{ID: "signalbox-console", Secret: "console-secret", RedirectURI: base + "/auth/callback"}}, oidcop.Options{})
	startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", httpAddr, "-admin-token", "test-admin-token",
		"-director=false", "-curri-addr", host + ":0",
		"-oidc-issuer", op.Issuer, "-oidc-client-id", "signalbox-console", "-oidc-client-secret", "console-secret",
		"-oidc-redirect-url", base + "/auth/callback", "-oidc-admin-groups", "noc-admins", "-oidc-viewer-groups", "noc,ops-viewers",
		"-oidc-provider-name", "Corp SSO"}, filepath.Join(dir, "serve.log"))

	b := startBrowser(t, screenshotDir(t), 90*time.Second)
	signIn := func(user string) {
		t.Helper()
		b.do("open console as "+user, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
		b.shot("oidc-signin")
		if got := b.text("#signin-oidc"); got != "Sign in with Corp SSO" {
			t.Errorf("sign-in button says %q", got)
		}
		b.do("to the provider as "+user, chromedp.Click(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), user), chromedp.SendKeys(chromedp.CSS("#password"), "pw-"+user),
			chromedp.Click(chromedp.CSS("button[type=submit]")))
	}
	// fetchStatus runs a request from the page (its cookies, no token) and
	// answers "status body".
	fetchStatus := func(method, path, body string, csrf bool) string {
		t.Helper()
		return b.evalString(`(async () => {
			const h = {'Content-Type': 'application/json'};
			if (` + map[bool]string{true: "true", false: "false"}[csrf] + `) h['X-CSRF-Token'] = (await (await fetch('/auth/session')).json()).csrf;
			const r = await fetch('` + path + `', {method: '` + method + `', headers: h` + map[bool]string{true: ", body: '" + body + "'", false: ""}[body != ""] + `});
			return r.status + ' ' + await r.text();
		})()`)
	}

	// Ada, an admin: in, a directory made through the console, out.
	signIn("ada")
	b.do("ada signed in", chromedp.WaitVisible(chromedp.CSS("#role")))
	if role, name := b.text("#role"), b.text("#who-name"); role != "admin" || name != "ada" {
		t.Fatalf("signed in as %q with role %q, want ada admin", name, role)
	}
	b.shot("oidc-admin")
	b.do("create directory", chromedp.Click(chromedp.CSS("#nav-directories")), chromedp.WaitVisible(chromedp.CSS("#directories")),
		chromedp.Click(chromedp.CSS("#page-directories details summary")),
		chromedp.SetValue(chromedp.CSS(`#directory-form [data-field="id"] input`), "sso"),
		chromedp.SetValue(chromedp.CSS(`#directory-form [data-field="name"] input`), "Made by Ada"),
		chromedp.Click(chromedp.CSS(`#directory-form button[type=submit]`)))
	b.poll("directory created", `document.querySelector('#dir-import-form') !== null`, 10*time.Second)
	if got := fetchStatus("POST", "/api/v1/directories", `{"id":"forged","name":"x"}`, false); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "X-CSRF-Token") {
		t.Errorf("a change with the cookie but without the CSRF token: %s", got)
	}
	cookie := b.evalString(`(async () => (await (await fetch('/auth/session')).json()).subject)()`)
	if cookie != "u-ada" {
		t.Errorf("session subject %q", cookie)
	}
	b.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	if got := fetchStatus("GET", "/api/v1/directories", "", false); !strings.HasPrefix(got, "401 ") {
		t.Errorf("after sign-out the browser still reads the API: %s", got)
	}

	// Bob, a viewer: reads, is told he cannot change, and is refused.
	signIn("bob")
	b.do("bob signed in", chromedp.WaitVisible(chromedp.CSS("#role")))
	if role := b.text("#role"); role != "viewer" {
		t.Fatalf("bob's role %q, want viewer", role)
	}
	b.do("bob on directories", chromedp.Click(chromedp.CSS("#nav-directories")), chromedp.WaitVisible(chromedp.CSS(".readonly-note")))
	b.poll("bob sees ada's directory", `document.querySelector('#directories').innerText.includes('Made by Ada')`, 10*time.Second)
	if got := fetchStatus("POST", "/api/v1/directories", `{"id":"bobs","name":"x"}`, true); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "viewer role") {
		t.Errorf("a viewer's change: %s", got)
	}
	b.shot("oidc-viewer")
	b.do("bob signs out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))

	// Eve's groups have no role: a page that says so, and no session.
	signIn("eve")
	b.do("eve refused", chromedp.WaitVisible(chromedp.CSS("#signin-message")))
	if msg := b.text("#signin-message"); !strings.Contains(msg, "eve is in no group") || !strings.Contains(msg, "sales") {
		t.Errorf("eve's page: %q", msg)
	}
	if got := fetchStatus("GET", "/auth/session", "", false); !strings.HasPrefix(got, "401 ") {
		t.Errorf("eve has a session: %s", got)
	}

	// The provider goes down: a clear page, no way in.
	op.Close()
	b.do("provider down", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")),
		chromedp.Click(chromedp.CSS("#signin-oidc")), chromedp.WaitVisible(chromedp.CSS("#signin-message")))
	if title := b.text("#signin-error h1"); title != "The identity provider does not answer" {
		t.Errorf("provider down: page %q: %s", title, b.text("#signin-message"))
	}
	b.shot("oidc-provider-down")

	// What the server recorded: the audit log names the people, the
	// metrics count each result.
	code, body := apiAt(t, httpAddr, "test-admin-token", "GET", "/api/v1/audit?since=-1h", "")
	if code != 200 {
		t.Fatalf("audit: %d %s", code, body)
	}
	for _, want := range []string{`"actor":"ada","token_id":"oidc:u-ada","role":"admin","action":"create directory"`,
		`"actor":"ada","token_id":"oidc:u-ada","role":"admin","action":"sign in"`,
		`"actor":"ada","token_id":"oidc:u-ada","role":"admin","action":"sign out"`,
		`"actor":"bob","token_id":"oidc:u-bob","role":"viewer","action":"sign in"`,
		`"actor":"eve","token_id":"oidc:u-eve","role":"","action":"refuse sign-in"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("audit log lacks %s:\n%s", want, body)
		}
	}
	_, metrics := apiAt(t, httpAddr, "", "GET", "/metrics", "")
	for _, want := range []string{`signalbox_signin_total{result="ok"} 2`, `signalbox_signin_total{result="no_role"} 1`,
		`signalbox_signin_total{result="provider_down"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
