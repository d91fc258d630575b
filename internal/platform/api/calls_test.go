package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/store"
)

func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestCallsQuery(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	recs := []store.CallRecord{
		{Time: now.Add(-3 * time.Hour), Policy: "default", Calling: "4155550100", Called: "1000", Decision: "permit", Step: "default"},
		{Time: now.Add(-90 * time.Minute), Policy: "default", Calling: "9725550101", Called: "1001", Decision: "deny", Step: "rule", RuleID: 7},
		{Time: now.Add(-30 * time.Minute), Policy: "sales", Calling: "9725550101", Called: "2000", Decision: "deny", Step: "block_list"},
		{Time: now.Add(-time.Minute), Policy: "default", Calling: "2125550199", Called: "1000", TransformedCalled: "+15551000", Decision: "divert", Step: "rule"},
	}
	if err := e.st.InsertCalls(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query   string
		callers []string // newest first
	}{
		{"", []string{"2125550199", "9725550101", "9725550101", "4155550100"}},
		{"?number=9725550101", []string{"9725550101", "9725550101"}},
		{"?number=%2B15551000", []string{"2125550199"}},
		{"?decision=deny", []string{"9725550101", "9725550101"}},
		{"?decision=deny&policy=sales", []string{"9725550101"}},
		{"?since=-1h", []string{"2125550199", "9725550101"}},
		{"?since=2h", []string{"2125550199", "9725550101", "9725550101"}},
		{"?until=-1h", []string{"9725550101", "4155550100"}},
		{"?since=" + now.Add(-4*time.Hour).Format(time.RFC3339) + "&until=" + now.Add(-2*time.Hour).Format(time.RFC3339), []string{"4155550100"}},
		{"?limit=1", []string{"2125550199"}},
	}
	for _, c := range cases {
		var res struct{ Calls []store.CallRecord }
		e.must(200, "GET", "/api/v1/calls"+c.query, "").decode(t, &res)
		var got []string
		for _, r := range res.Calls {
			got = append(got, r.Calling)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.callers) {
			t.Errorf("%s: calls from %v, want %v", c.query, got, c.callers)
		}
	}

	bad := []struct{ query, field string }{
		{"?since=yesterday", "since"},
		{"?until=2026-13-01", "until"},
		{"?limit=0", "limit"},
		{"?limit=10001", "limit"},
		{"?limit=ten", "limit"},
		{"?decision=maybe", "decision"},
		{"?numbr=1", "numbr"},
		{"?since=-1h&until=-2h", "until"},
	}
	for _, b := range bad {
		r := e.must(400, "GET", "/api/v1/calls"+b.query, "")
		if eb := r.errBody(t); eb.Field != b.field || !strings.Contains(eb.Error, b.field) {
			t.Errorf("%s: error %+v, want it to name %q", b.query, eb, b.field)
		}
	}
}

func TestParseTimeParam(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"", time.Time{}, true},
		{"-1h", now.Add(-time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"2026-02-28T10:00:00Z", time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC), true},
		{"2026-02-28T10:00:00.5+01:00", time.Date(2026, 2, 28, 9, 0, 0, 5e8, time.UTC), true},
		{"2026-02-28", time.Time{}, false},
		{"-1d", time.Time{}, false},
	}
	for _, c := range cases {
		got, err := parseTimeParam("since", c.in, now)
		if (err == nil) != c.ok || !got.Equal(c.want) {
			t.Errorf("%q: %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// FuzzCallQuery: any query string gives a valid query or a 400 naming a
// parameter, never a panic.
func FuzzCallQuery(f *testing.F) {
	for _, s := range []string{"", "since=-1h", "until=2026-01-02T15:04:05Z&limit=5", "decision=deny&number=%2B1", "limit=-1", "since=9999999h"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseCallQuery(v, now)
		if err != nil {
			ae, ok := err.(*apiError)
			if !ok || ae.Status != 400 || ae.Field == "" {
				t.Fatalf("%q: error %#v", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > maxCallLimit {
			t.Fatalf("%q: limit %d", raw, q.Limit)
		}
	})
}
