package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAssets: the console's pages, modules and the vendored chart library
// are served from the binary with types a browser accepts under the CSP.
func TestAssets(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	cases := []struct {
		path, ctype, contains string
	}{
		{"/", "text/html", `type="module" src="js/main.js"`},
		{"/app.css", "text/css", "focus-visible"},
		{"/js/main.js", "javascript", "import"},
		{"/js/ui.js", "javascript", "export async function api"},
		{"/js/stats.js", "javascript", "export class Chart"},
		{"/js/pages/overview.js", "javascript", "chart-calls"},
		{"/js/pages/policy.js", "javascript", "evaluate"},
		{"/js/pages/director.js", "javascript", "/feeds"},
		{"/js/pages/alarms.js", "javascript", "/alarms"},
		{"/js/pages/settings.js", "javascript", "/tokens"},
		{"/js/pages/about.js", "javascript", "/version"},
		{"/vendor/uPlot.iife.min.js", "javascript", "uPlot"},
		{"/vendor/uPlot.min.css", "text/css", ".uplot"},
		{"/vendor/uPlot.LICENSE", "text/plain", "MIT"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, c.ctype) {
				t.Errorf("Content-Type %q, want %s", ct, c.ctype)
			}
			if !strings.Contains(string(b), c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("nosniff missing")
			}
		})
	}
	resp, err := http.Get(srv.URL + "/nosuch.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("missing asset: %d", resp.StatusCode)
	}
}
