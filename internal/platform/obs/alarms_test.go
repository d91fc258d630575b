package obs

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAlarms(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAlarms(reg)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }

	a.Raise("feed_disconnected", "feed/probe-a", Major, "no connection for 30s")
	now = now.Add(time.Minute)
	a.Raise("feed_disconnected", "feed/probe-a", Major, "no connection for 90s")
	a.Raise("curri_unknown_policy", "curri/nosuch", Warning, "unknown policy queried")

	act := a.Active()
	if len(act) != 2 || act[0].Severity != Major || act[0].Count != 2 || act[0].Description != "no connection for 90s" ||
		!act[0].FirstSeen.Before(act[0].LastSeen) {
		t.Fatalf("active: %+v", act)
	}
	if got := testutil.ToFloat64(a.gauge.WithLabelValues("major")); got != 1 {
		t.Fatalf("gauge major %v", got)
	}
	// Escalation moves the gauge.
	a.Raise("curri_unknown_policy", "curri/nosuch", Minor, "still")
	if testutil.ToFloat64(a.gauge.WithLabelValues("warning")) != 0 || testutil.ToFloat64(a.gauge.WithLabelValues("minor")) != 1 {
		t.Fatal("severity change not reflected")
	}
	a.Clear("feed_disconnected", "feed/probe-a")
	a.Clear("feed_disconnected", "feed/probe-a") // idempotent
	if a.IsActive("feed_disconnected", "feed/probe-a") || len(a.Active()) != 1 {
		t.Fatal("clear failed")
	}
	h := a.History(10)
	if len(h) != 1 || h[0].Active || h[0].ClearedAt == nil {
		t.Fatalf("history %+v", h)
	}
	if err := testutil.CollectAndCompare(a.gauge, strings.NewReader(`
# HELP signalbox_alarms_active Active alarms by severity.
# TYPE signalbox_alarms_active gauge
signalbox_alarms_active{severity="critical"} 0
signalbox_alarms_active{severity="major"} 0
signalbox_alarms_active{severity="minor"} 1
signalbox_alarms_active{severity="warning"} 0
`)); err != nil {
		t.Fatal(err)
	}
}
