package app

import (
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/oidcop"
)

// TestSignInIssuerMismatch: serve configured with the provider's issuer
// but for a trailing slash warns at start that sign-in will fail, and
// starts; a person's sign-in gets a page naming both issuers (not "the
// provider does not answer"), counted as misconfigured.
func TestSignInIssuerMismatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	op := oidcop.Start(t, []oidcop.User{{ID: "u-ada", Username: "ada", Password: "pw-ada", Groups: []string{"noc-admins"}}},
		[]oidcop.Client{{ID: "console", Secret: "s", RedirectURI: "http://127.0.0.1:1/auth/callback"}}, oidcop.Options{})
	logf := filepath.Join(dir, "serve.log")
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0", "-curri-addr", "127.0.0.1:0",
		"-admin-token", "test-admin-token", "-director=false",
		"-oidc-issuer", op.Issuer + "/", "-oidc-client-id", "console", "-oidc-client-secret", "s",
		"-oidc-redirect-url", "http://127.0.0.1:1/auth/callback", "-oidc-admin-groups", "noc-admins"}, logf)
	want := `issuer mismatch: configured "` + op.Issuer + `/", the provider says "` + op.Issuer + `"`
	testkit.WaitForState(t, 20*time.Second, "the warning at start", func() (bool, string) {
		b, _ := os.ReadFile(logf)
		// The text log quotes the message: its quotes come escaped.
		return strings.Contains(string(b), "console sign-in will fail: "+strings.ReplaceAll(want, `"`, `\"`)), ""
	})
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Get("http://" + serve.http() + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "Sign-in is misconfigured") || !strings.Contains(string(body), html.EscapeString(want)) {
		t.Errorf("the sign-in page: %d %s", resp.StatusCode, body)
	}
	_, m := get(t, "http://"+serve.http()+"/metrics")
	if !strings.Contains(m, `signalbox_signin_total{result="misconfigured"} 1`) || !strings.Contains(m, `signalbox_signin_total{result="provider_down"} 0`) {
		t.Errorf("the sign-in counts:\n%s", grepLines(m, "signalbox_signin_total"))
	}
}
