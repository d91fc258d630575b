package api

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// monitorEnv is an API with alarms and a gatherer, over a real store.
func monitorEnv(t *testing.T, alarms AlarmSource, g prometheus.Gatherer) *httptest.Server {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DSN: "sqlite", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Store: st, AdminToken: adminToken}
	if alarms != nil {
		cfg.Alarms = alarms
	}
	if g != nil {
		cfg.Gatherer = g
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %d %s: %v", url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func TestBucketQuantile(t *testing.T) {
	b := [][2]float64{{1, 10}, {2, 60}, {4, 100}}
	cases := []struct {
		name  string
		q     float64
		total uint64
		bk    [][2]float64
		want  float64 // NaN = nil
	}{
		{"in first bucket", 0.05, 100, b, 0.5},
		{"interpolated in second", 0.5, 100, b, 1.8},
		{"p95 in third", 0.95, 100, b, 3.75},
		{"exact bound", 0.6, 100, b, 2},
		{"beyond last finite bound", 0.99, 200, b, 4},
		{"no observations", 0.5, 0, b, math.NaN()},
		{"no buckets", 0.5, 10, nil, math.NaN()},
		{"empty lower buckets skipped", 0.5, 10, [][2]float64{{1, 0}, {2, 0}, {3, 10}}, 2.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := bucketQuantile(c.q, c.bk, c.total)
			if math.IsNaN(c.want) {
				if got != nil {
					t.Fatalf("got %v, want nil", *got)
				}
				return
			}
			if got == nil || math.Abs(*got-c.want) > 1e-9 {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestStats(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	req := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mCURRIRequests}, []string{"policy", "decision"})
	dur := prometheus.NewHistogram(prometheus.HistogramOpts{Name: mCURRIDuration, Buckets: []float64{1e-4, 1e-3, 1e-2}})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mCURRIErrors}, []string{"reason"})
	ingest := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mTopicCopies}, []string{"topic"})
	delivered := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mFeedDelivered}, []string{"feed"})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mFeedFailures}, []string{"feed"})
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mFeedLag}, []string{"feed"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mFeedLatency, Buckets: []float64{.001, .01}}, []string{"feed"})
	reg.MustRegister(req, dur, errs, ingest, delivered, failures, lag, lat)
	alarms := obs.NewAlarms(reg)

	req.WithLabelValues("default", "permit").Add(7)
	req.WithLabelValues("default", "deny").Add(2)
	req.WithLabelValues("_unknown", "indeterminate").Add(1)
	errs.WithLabelValues("malformed").Add(1)
	errs.WithLabelValues("doctype") // zero: left out
	for i := 0; i < 90; i++ {
		dur.Observe(50e-6)
	}
	for i := 0; i < 10; i++ {
		dur.Observe(5e-3)
	}
	ingest.WithLabelValues("SCP").Add(40)
	ingest.WithLabelValues("NRF").Add(2)
	delivered.WithLabelValues("probe-b").Add(30)
	delivered.WithLabelValues("probe-a").Add(12)
	failures.WithLabelValues("probe-a").Add(3)
	lag.WithLabelValues("probe-a").Set(5)
	lat.WithLabelValues("probe-a").Observe(0.0005)
	alarms.Raise("feed_disconnected", "feed/probe-a", obs.Major, "down")

	srv := monitorEnv(t, nil, reg)
	var st Stats
	if code := getJSON(t, srv.URL+"/api/v1/stats", &st); code != 200 {
		t.Fatalf("status %d", code)
	}
	if st.CURRI.Requests != 10 || st.CURRI.ByDecision["permit"] != 7 || st.CURRI.ByDecision["deny"] != 2 ||
		st.CURRI.ByDecision["indeterminate"] != 1 || st.CURRI.ByPolicy["default"] != 9 {
		t.Errorf("curri counters: %+v", st.CURRI)
	}
	if len(st.CURRI.Errors) != 1 || st.CURRI.Errors["malformed"] != 1 {
		t.Errorf("errors: %v", st.CURRI.Errors)
	}
	l := st.CURRI.Latency
	if l == nil || l.Count != 100 || l.P50 == nil || *l.P50 > 1e-4 || l.P99 == nil || *l.P99 < 1e-3 || *l.P99 > 1e-2 {
		t.Errorf("latency: %+v", l)
	}
	if len(l.Buckets) != 3 || l.Buckets[0] != [2]float64{1e-4, 90} {
		t.Errorf("buckets: %v", l.Buckets)
	}
	if st.Ingest.Copies["SCP"] != 40 || st.Ingest.Copies["NRF"] != 2 {
		t.Errorf("ingest: %+v", st.Ingest)
	}
	if len(st.Feeds) != 2 || st.Feeds[0].Name != "probe-a" || st.Feeds[0].Delivered != 12 || st.Feeds[0].Failed != 3 ||
		st.Feeds[0].Lag != 5 || st.Feeds[0].Latency == nil || st.Feeds[0].Latency.Count != 1 || st.Feeds[1].Delivered != 30 {
		t.Errorf("feeds: %+v", st.Feeds)
	}
	if st.Alarms["major"] != 1 || st.Alarms["critical"] != 0 {
		t.Errorf("alarms: %v", st.Alarms)
	}
	if !st.Process.HasProcInfo || st.Process.RSSBytes <= 0 {
		t.Errorf("process: %+v", st.Process)
	}
	if time.Since(st.Time) > time.Minute || st.UnixMS != st.Time.UnixMilli() {
		t.Errorf("time %v / %d", st.Time, st.UnixMS)
	}
}

func TestStatsAndAlarmsUnavailable(t *testing.T) {
	srv := monitorEnv(t, nil, nil)
	for _, p := range []string{"/api/v1/stats", "/api/v1/alarms"} {
		var e errorBody
		if code := getJSON(t, srv.URL+p, &e); code != http.StatusServiceUnavailable || e.Error == "" {
			t.Errorf("%s: %d %+v", p, code, e)
		}
	}
}

func TestAlarms(t *testing.T) {
	a := obs.NewAlarms(nil)
	a.Raise("feed_disconnected", "feed/a", obs.Major, "connection refused")
	a.Raise("retention_loss", "feed/b", obs.Critical, "lost 5")
	for _, f := range []string{"c", "d", "e"} {
		a.Raise("feed_disconnected", "feed/"+f, obs.Minor, "x")
		a.Clear("feed_disconnected", "feed/"+f)
	}
	srv := monitorEnv(t, a, nil)

	cases := []struct {
		query       string
		code        int
		wantHistory []string // alarm ids, newest first
		field       string
	}{
		{"", 200, []string{"feed/e/feed_disconnected", "feed/d/feed_disconnected", "feed/c/feed_disconnected"}, ""},
		{"?limit=1", 200, []string{"feed/e/feed_disconnected"}, ""},
		{"?limit=0", 200, []string{}, ""},
		{"?limit=-1", 400, nil, "limit"},
		{"?limit=x", 400, nil, "limit"},
		{"?limit=1001", 400, nil, "limit"},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			var body struct {
				Active  []obs.Alarm `json:"active"`
				History []obs.Alarm `json:"history"`
				Error   string      `json:"error"`
				Field   string      `json:"field"`
			}
			code := getJSON(t, srv.URL+"/api/v1/alarms"+c.query, &body)
			if code != c.code {
				t.Fatalf("status %d, want %d (%s)", code, c.code, body.Error)
			}
			if c.code != 200 {
				if body.Field != c.field || body.Error == "" {
					t.Fatalf("error %+v", body)
				}
				return
			}
			if len(body.Active) != 2 || body.Active[0].Severity != obs.Critical || !body.Active[0].Active {
				t.Fatalf("active: %+v", body.Active)
			}
			if body.History == nil || len(body.History) != len(c.wantHistory) {
				t.Fatalf("history: %+v", body.History)
			}
			for i, id := range c.wantHistory {
				if body.History[i].ID != id || body.History[i].ClearedAt == nil {
					t.Errorf("history[%d] = %+v, want %s", i, body.History[i], id)
				}
			}
		})
	}
}
