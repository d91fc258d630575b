package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

func TestFeedsCRUD(t *testing.T) {
	e := newEnv(t)
	const probe = `{"name":"probe1","type":"synthetic","sources":["SCP","NRF"],"endpoint":"127.0.0.1:5000"}`
	steps := []struct {
		name, method, path, body string
		status                   int
		field, contains          string
	}{
		{"empty list", "GET", "/api/v1/feeds", "", 200, "", `"feeds":[]`},
		{"create", "POST", "/api/v1/feeds", probe, 201, "", `"endpoint":"127.0.0.1:5000"`},
		{"duplicate", "POST", "/api/v1/feeds", probe, 409, "name", "already exists"},
		{"invalid endpoint", "POST", "/api/v1/feeds", `{"name":"p2","type":"synthetic","sources":["SCP"],"endpoint":"nowhere"}`, 400, "endpoint", "endpoint"},
		{"bad type", "POST", "/api/v1/feeds", `{"name":"p2","type":"carrier-pigeon","sources":["SCP"]}`, 400, "type", "type"},
		{"unknown field", "POST", "/api/v1/feeds", `{"name":"p2","type":"kafka","sources":["SCP"],"topic":"t","partitions":3}`, 400, "partitions", "unknown field"},
		{"bad name", "POST", "/api/v1/feeds", `{"name":"../x","type":"kafka","sources":["SCP"],"topic":"t"}`, 400, "name", "feed name"},
		{"upper-case name", "POST", "/api/v1/feeds", `{"name":"Probe","type":"kafka","sources":["SCP"],"topic":"t"}`, 400, "name", "feed name"},
		{"get", "GET", "/api/v1/feeds/probe1", "", 200, "", `"sources":["SCP","NRF"]`},
		{"get missing", "GET", "/api/v1/feeds/nope", "", 404, "", "nope"},
		{"list", "GET", "/api/v1/feeds", "", 200, "", `"name":"probe1"`},
		{"status", "GET", "/api/v1/feeds/probe1/status", "", 200, "", `"running":true`},
		{"status missing", "GET", "/api/v1/feeds/nope/status", "", 404, "", "nope"},
		{"update rename", "PUT", "/api/v1/feeds/probe1", `{"name":"probe2","type":"synthetic","sources":["SCP"],"endpoint":"127.0.0.1:5001"}`, 400, "name", "cannot be renamed"},
		{"update invalid", "PUT", "/api/v1/feeds/probe1", `{"type":"synthetic","sources":[],"endpoint":"127.0.0.1:5001"}`, 400, "sources", "sources"},
		{"update missing", "PUT", "/api/v1/feeds/nope", `{"type":"kafka","sources":["SCP"],"topic":"t"}`, 404, "", "nope"},
		{"update", "PUT", "/api/v1/feeds/probe1", `{"type":"synthetic","sources":["SCP"],"endpoint":"127.0.0.1:5001"}`, 200, "", `"name":"probe1"`},
		{"get updated", "GET", "/api/v1/feeds/probe1", "", 200, "", `"endpoint":"127.0.0.1:5001"`},
		{"delete", "DELETE", "/api/v1/feeds/probe1", "", 204, "", ""},
		{"delete again", "DELETE", "/api/v1/feeds/probe1", "", 404, "", "probe1"},
	}
	for _, s := range steps {
		r := e.admin(s.method, s.path, s.body)
		if r.Status != s.status {
			t.Fatalf("%s: status %d, want %d; body %s", s.name, r.Status, s.status, r.Body)
		}
		if !strings.Contains(string(r.Body), s.contains) {
			t.Errorf("%s: body %s lacks %q", s.name, r.Body, s.contains)
		}
		if s.status >= 400 && s.field != "" {
			if eb := r.errBody(t); eb.Field != s.field {
				t.Errorf("%s: error %+v, want field %q", s.name, eb, s.field)
			}
		}
	}
	e.feeds.mu.Lock()
	defer e.feeds.mu.Unlock()
	// Prepared once, on create (an update must not reposition a running
	// feed's group); never for refused input.
	if strings.Join(e.feeds.prepared, ",") != "probe1" {
		t.Errorf("Prepare calls: %v", e.feeds.prepared)
	}
	if len(e.feeds.running) != 0 {
		t.Errorf("after delete the runtime still runs %v", e.feeds.running)
	}
	var feedChanges int
	for _, c := range e.changes {
		if c == ChangedFeeds {
			feedChanges++
		}
	}
	if feedChanges != 3 {
		t.Errorf("OnChange(feeds) called %d times, want 3 (create, update, delete)", feedChanges)
	}
}

func TestFeedPreparedBeforeStored(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "/api/v1/feeds", `{"name":"k","type":"kafka","sources":["PCF"],"topic":"out"}`)
	e.feeds.mu.Lock()
	stored := e.feeds.storedAtPrepare["k"]
	e.feeds.mu.Unlock()
	if stored {
		t.Error("the feed was stored before Prepare ran")
	}
}

func TestFeedPasswordRedacted(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "/api/v1/feeds", `{"name":"ext","type":"kafka","sources":["SCP"],"topic":"out","kafka":{"brokers":["b:9092"],"sasl_mechanism":"PLAIN","username":"u","password":"s3cret"}}`)
	got := e.must(200, "GET", "/api/v1/feeds/ext", "")
	if strings.Contains(string(got.Body), "s3cret") || !strings.Contains(string(got.Body), redacted) {
		t.Fatalf("GET shows the password: %s", got.Body)
	}
	// Sending the fetched spec back keeps the stored password.
	e.must(200, "PUT", "/api/v1/feeds/ext", string(got.Body))
	rec, err := e.st.GetFeed(context.Background(), "ext")
	if err != nil {
		t.Fatal(err)
	}
	var spec director.FeedSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kafka == nil || spec.Kafka.Password != "s3cret" {
		t.Errorf("stored spec after PUT of redacted body: %+v", spec.Kafka)
	}
	e.must(400, "POST", "/api/v1/feeds", `{"name":"ext2","type":"kafka","sources":["SCP"],"topic":"out","kafka":{"brokers":["b:9092"],"password":"********"}}`)
}

func TestFeedsWithoutDirector(t *testing.T) {
	e := newEnv(t)
	h, err := New(Config{Store: e.st, AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	if rec := serve(h, "POST", "/api/v1/feeds", `{"name":"k","type":"kafka","sources":["PCF"],"topic":"out"}`); rec.Code != 503 {
		t.Errorf("create without director: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(h, "GET", "/api/v1/feeds", ""); rec.Code != 200 {
		t.Errorf("list without director: %d %s", rec.Code, rec.Body)
	}
}
