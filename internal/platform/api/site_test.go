package api

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/platform/store"
)

type testSite struct{ err error }

func (s testSite) State(context.Context) (any, error) {
	return map[string]any{"site": "east", "secret": "kept"}, s.err
}

// TestSiteOwnership: with two-site redundancy a feed is created at the site
// that runs it, stays there, and is changed only there; the peer's state
// is for admins, and a node without a site pair says so.
func TestSiteOwnership(t *testing.T) {
	e := newEnvWith(t, func(e *env, c *Config) { c.Site, c.SiteName = testSite{}, "east" })
	e.must(201, "POST", "/api/v1/feeds", `{"name":"lake","type":"kafka","sources":["SCP"],"topic":"OUT"}`)
	if r := e.admin("GET", "/api/v1/feeds/lake", ""); !strings.Contains(string(r.Body), `"site":"east"`) {
		t.Fatalf("created at east: %s", r.Body)
	}
	if r := e.admin("POST", "/api/v1/feeds", `{"name":"x","site":"west","type":"kafka","sources":["SCP"],"topic":"OUT"}`); r.Status != 400 || r.errBody(t).Field != "site" {
		t.Fatalf("created for the other site: %d %s", r.Status, r.Body)
	}
	if r := e.admin("PUT", "/api/v1/feeds/lake", `{"site":"west","type":"kafka","sources":["SCP"],"topic":"OUT"}`); r.Status != 400 || !strings.Contains(string(r.Body), "stays at the site") {
		t.Fatalf("moved: %d %s", r.Status, r.Body)
	}
	e.must(200, "PUT", "/api/v1/feeds/lake", `{"type":"kafka","sources":["SCP","NRF"],"topic":"OUT"}`)
	// A feed mirrored from the peer (the pair writes it to the store).
	if err := e.st.CreateFeed(context.Background(), &store.FeedRecord{Name: "west-lake",
		Spec: []byte(`{"name":"west-lake","site":"west","type":"kafka","sources":["SCP"],"topic":"W"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"PUT", "DELETE"} {
		r := e.admin(m, "/api/v1/feeds/west-lake", `{"type":"kafka","sources":["SCP"],"topic":"W2"}`)
		if r.Status != 409 || !strings.Contains(string(r.Body), `run by site \"west\"`) {
			t.Fatalf("%s of the peer's feed: %d %s", m, r.Status, r.Body)
		}
	}
	if r := e.admin("GET", "/api/v1/site", ""); r.Status != 200 || !strings.Contains(string(r.Body), `"secret":"kept"`) {
		t.Fatalf("site state: %d %s", r.Status, r.Body)
	}
	var viewer struct{ Token string }
	e.must(201, "POST", "/api/v1/tokens", `{"name":"noc","role":"viewer"}`).decode(t, &viewer)
	if r := e.req("GET", "/api/v1/site", viewer.Token, "", ""); r.Status != 403 {
		t.Fatalf("site state to a viewer: %d %s", r.Status, r.Body)
	}

	broken := newEnvWith(t, func(e *env, c *Config) { c.Site, c.SiteName = testSite{errors.New("kafka down")}, "east" })
	if r := broken.admin("GET", "/api/v1/site", ""); r.Status != 503 || !strings.Contains(string(r.Body), "kafka down") {
		t.Fatalf("site state failing: %d %s", r.Status, r.Body)
	}
	alone := newEnv(t)
	if r := alone.admin("GET", "/api/v1/site", ""); r.Status != 404 {
		t.Fatalf("site state without a pair: %d %s", r.Status, r.Body)
	}
	if r := alone.admin("POST", "/api/v1/feeds", `{"name":"x","site":"west","type":"kafka","sources":["SCP"],"topic":"OUT"}`); r.Status != 400 || !strings.Contains(string(r.Body), "not in a site pair") {
		t.Fatalf("a site without a pair: %d %s", r.Status, r.Body)
	}
}
