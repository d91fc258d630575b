package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/ports"
)

const rulesDir = "../../deploy/prometheus"

// The shipped alert rules load and pass their unit tests in promtool, and
// every alarm kind signalbox raises has an alert.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool := testkit.Tool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "signalbox.rules.yml"}, {"test", "rules", "signalbox.rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules, err := os.ReadFile(filepath.Join(rulesDir, "signalbox.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(rulesDir, "signalbox.rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range alarmKinds {
		sel := fmt.Sprintf(`signalbox_alarm_active{kind="%s"}`, k)
		if !strings.Contains(string(rules), sel) {
			t.Errorf("alarm %s has no alert rule (%s)", k, sel)
		}
		if !strings.Contains(string(tests), "kind: "+k+",") {
			t.Errorf("the alert on alarm %s has no promtool test", k)
		}
	}
}

// A real Prometheus scrapes a running serve (on PostgreSQL, so the cluster
// rate-limit metrics are there too), loads the shipped rules and evaluates
// them without error, and finds the metrics the README names with the
// labels it gives them, once traffic has made them.
func TestPrometheusScrapesServe(t *testing.T) {
	t.Parallel()
	testkit.Tool(t, "prometheus")
	cfg := testConfig(t, t.TempDir(), false)
	cfg.Store = pgSchemaDSN(t)
	cfg.RateLimitSync = 100 * time.Millisecond
	s := startServer(t, cfg)
	defer s.Shutdown()
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"score":5}`)
	}))
	defer rep.Close()

	// Traffic that makes the labelled series: a named call, an anonymous
	// call, a malformed request, a path CURRI does not serve, list and
	// directory changes, reputation lookups.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/directories", `{"id":"corp","name":"Corp"}`},
		{"POST", "/api/v1/directories/corp/entries", `{"number":"2001","name":"Alice"}`},
		{"PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit","modify":{"calling_name":"directory:corp"}},"rate_limit":{"per_calling":{"calls":100,"window_seconds":60}},` +
			`"reputation":{"url":"` + rep.URL + `/?n={number}","actions":[{"min_score":90,"action":{"decision":"deny"}}]}}`},
		{"POST", "/api/v1/webhooks", `{"name":"noc","url":"` + rep.URL + `/hook","events":["alarm_raised"]}`},
	} {
		if code, body := apiDo(t, s, c.method, c.path, c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	cucm := dialCUCM(t, s.CURRIAddr())
	testkit.WaitFor(t, 10*time.Second, "directory live", func() bool {
		_, body := cucm.do("POST", "/curri/default", xacmlRequest("2001", "5000"))
		return strings.Contains(body, "Alice")
	})
	cucm.do("POST", "/curri/default", xacmlRequest("", "5000"))
	cucm.do("POST", "/curri/default", strings.Replace(xacmlRequest("2001", "5000"), "</Subject>",
		`<Attribute AttributeId="urn:Cisco:uc:1.0:callingpartyname" DataType="http://www.w3.org/2001/XMLSchema#string"><AttributeValue>Alice</AttributeValue></Attribute></Subject>`, 1))
	cucm.do("POST", "/curri/default", "<Request><Subject>")
	cucm.do("POST", "/not-curri", xacmlRequest("2001", "5000"))

	query := startPrometheus(t, s.HTTPAddr())
	checkSeries(t, query, curriMetrics)
	var alarmSeries struct {
		Data []map[string]string `json:"data"`
	}
	if err := query("/api/v1/series?match[]=signalbox_alarm_active", &alarmSeries); err != nil {
		t.Fatal(err)
	}
	if len(alarmSeries.Data) != len(alarmKinds) {
		t.Errorf("signalbox_alarm_active has %d kinds, want %d (declared at start)", len(alarmSeries.Data), len(alarmKinds))
	}

	// Every shipped rule was evaluated against the live data without error,
	// and none fires on a healthy node.
	testkit.WaitFor(t, 20*time.Second, "rules evaluated", func() bool {
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name           string `json:"name"`
						Health         string `json:"health"`
						LastError      string `json:"lastError"`
						State          string `json:"state"`
						LastEvaluation string `json:"lastEvaluation"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if query("/api/v1/rules", &r) != nil || len(r.Data.Groups) != 2 {
			return false
		}
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				if rule.Health != "ok" {
					if rule.Health == "err" {
						t.Errorf("rule %s: %s", rule.Name, rule.LastError)
					}
					return false
				}
				if rule.State != "inactive" {
					t.Errorf("rule %s is %s on a healthy node", rule.Name, rule.State)
				}
			}
		}
		return true
	})
}

// The metrics the README and deploy/README name, with their documented
// labels, by the test that sees them in a real Prometheus scraping a
// serve: TestPrometheusScrapesServe (CURRI, PostgreSQL rate-limit sync),
// TestDashboardsQueryRealMetrics (director traffic). The SNMP counters
// need a manager: TestAlarmsReachSNMPManager reads them from /metrics.
var (
	curriMetrics = map[string][]string{
		"signalbox_alarm_active":                          {"kind"},
		"signalbox_alarms_active":                         {"severity"},
		"signalbox_build_info":                            {"version"},
		"signalbox_calllog_dropped_total":                 nil,
		"signalbox_curri_anonymous_calls_total":           nil,
		"signalbox_curri_connections":                     nil,
		"signalbox_curri_tls_handshakes_waited_total":     nil,
		"signalbox_curri_errors_total":                    {"reason"},
		"signalbox_curri_http_errors_total":               {"reason"},
		"signalbox_curri_refused_total":                   {"reason"},
		"signalbox_signin_total":                          {"result"},
		"signalbox_curri_unknown_attributes_total":        {"attribute"},
		"signalbox_callpolicy_directory_lookups_total":    {"directory", "result"},
		"signalbox_policy_reloads_total":                  {"scope"},
		"signalbox_ratelimit_syncs_total":                 {"result"},
		"signalbox_ratelimit_cluster_sync_ok":             nil,
		"signalbox_curri_request_duration_seconds_bucket": {"le"},
		"signalbox_reputation_lookups_total":              {"policy", "result"},
		"signalbox_reputation_request_duration_seconds":   nil,
		"signalbox_webhook_events_total":                  {"webhook", "result"},
		"signalbox_webhook_queue_length":                  {"webhook"},
	}
	directorMetrics = map[string][]string{
		"signalbox_copy_invalid_total":                 {"topic", "reason"},
		"signalbox_feed_incomplete_copies_total":       {"feed", "reason", "action"},
		"signalbox_feed_reordered_total":               {"feed"},
		"signalbox_feed_flows_evicted_total":           {"feed"},
		"signalbox_feed_responses_first_total":         {"feed"},
		"signalbox_feed_shared_reader_drops_total":     {"feed"},
		"signalbox_feed_tap_fenced_commits_total":      {"sources"},
		"signalbox_feed_tap_rewinds_total":             {"sources"},
		"signalbox_feed_tap_rebalances_total":          {"sources"},
		"signalbox_feed_undeliverable_total":           {"feed"},
		"signalbox_feed_xdr_replayed_copies_total":     nil,
		"signalbox_feed_xdr_checkpoints_total":         {"feed", "outcome"},
		"signalbox_feed_xdr_upstream_stalls_total":     nil,
		"signalbox_xdr_handed_over_transactions_total": nil,
		"signalbox_xdr_transactions_total":             {"nf_type", "service", "status_class"},
		"signalbox_xdr_latency_seconds":                {"nf_type", "service"},
		"signalbox_xdrstore_records_written_total":     nil,
		"signalbox_xdrstore_records_dropped_total":     nil,
		"signalbox_xdr_failures_total":                 {"nf_type", "service", "cause"},
		"signalbox_xdr_producer_transactions_total":    {"service", "producer", "outcome"},
		"signalbox_xdr_roaming_transactions_total":     {"plmn", "service", "outcome"},
		"signalbox_xdr_label_overflow_total":           {"label"},
		"signalbox_calls_stream_produced_total":        nil,
		"signalbox_calls_stream_dropped_total":         nil,
		"signalbox_calls_stream_failed_total":          nil,
		"signalbox_kafka_refused_total":                {"reason"},
		"signalbox_ingest_rejected_total":              {"code"},
		"signalbox_ingest_body_bytes_in_flight":        nil,
		"signalbox_capture_dropped_total":              nil,
		"signalbox_capture_copies_total":               nil,
		"signalbox_captures_active":                    nil,
	}
	// siteMetrics exist with -site only: TestSiteTakeoverTrafficAtBothSites
	// checks them.
	siteMetrics = map[string][]string{
		"signalbox_site_mirrored_copies_total":     {"topic"},
		"signalbox_site_mirror_up":                 nil,
		"signalbox_site_mirror_errors_total":       nil,
		"signalbox_site_peer_up":                   nil,
		"signalbox_site_peer_errors_total":         nil,
		"signalbox_site_takeover":                  nil,
		"signalbox_site_positions_committed_total": nil,
		"signalbox_site_positions_pending":         nil,
	}
	snmpMetrics = map[string][]string{
		"signalbox_snmp_notifications_total":         {"manager", "result"},
		"signalbox_snmp_notifications_dropped_total": nil,
	}
)

// Every metric the docs name is checked, with the labels they give it.
func TestDocumentedMetricsAreChecked(t *testing.T) {
	named := regexp.MustCompile(`(signalbox_[a-z0-9_]*[a-z0-9])(\{([a-z_,]+)\})?`)
	docs, _ := filepath.Glob("../../docs/*.md")
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	for _, f := range append([]string{"../../README.md", "../../deploy/README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			labels, ok := curriMetrics[name]
			if !ok {
				labels, ok = directorMetrics[name]
			}
			if !ok {
				labels, ok = snmpMetrics[name]
			}
			if !ok {
				labels, ok = siteMetrics[name]
			}
			if !ok {
				t.Errorf("%s names %s, which no Prometheus test checks", f, name)
				continue
			}
			if m[3] != "" {
				for _, l := range strings.Split(m[3], ",") {
					if !slices.Contains(labels, l) {
						t.Errorf("%s names %s with label %s, which the test does not check", f, name, l)
					}
				}
			}
		}
	}
}

// checkSeries waits until Prometheus has a series of each metric, with
// each of its labels, and names every one still missing after 20 s.
func checkSeries(t *testing.T, query func(path string, v any) error, want map[string][]string) {
	t.Helper()
	missing := maps.Clone(want)
	deadline := time.Now().Add(20 * time.Second)
	for len(missing) > 0 && time.Now().Before(deadline) {
		for name, labels := range missing {
			var r struct {
				Data []map[string]string `json:"data"`
			}
			// A histogram's series are its _bucket, _count and _sum.
			sel := `{__name__=~"` + name + `(_bucket|_count|_sum)?"}`
			if query("/api/v1/series?match[]="+url.QueryEscape(sel), &r) != nil || len(r.Data) == 0 {
				continue
			}
			for _, l := range labels {
				if _, ok := r.Data[0][l]; !ok {
					t.Errorf("%s has no label %s: %v", name, l, r.Data[0])
				}
			}
			delete(missing, name)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for name := range missing {
		t.Errorf("no series of %s in Prometheus after 20 s", name)
	}
}

// startPrometheus starts a real Prometheus scraping target every second
// as job signalbox, with the shipped rules, until the test ends; query
// GETs its HTTP API and decodes the JSON answer.
func startPrometheus(t *testing.T, target string) (query func(path string, v any) error) {
	t.Helper()
	prom := testkit.Tool(t, "prometheus")
	promAddr := ports.Reserve(t, "127.0.0.1") // it is told its port
	rules, err := filepath.Abs(filepath.Join(rulesDir, "signalbox.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: signalbox
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := testkit.CommandContext(ctx, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	query = func(path string, v any) error {
		resp, err := http.Get("http://" + promAddr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		return json.Unmarshal(b, v)
	}
	testkit.WaitFor(t, 60*time.Second, "signalbox scraped (up == 1)", func() bool {
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		return query("/api/v1/query?query="+url.QueryEscape(`up{job="signalbox"}`), &r) == nil &&
			len(r.Data.Result) == 1 && r.Data.Result[0].Value[1] == "1"
	})

	return query
}

// The Grafana dashboards in deploy/grafana: every panel's query runs in a
// real Prometheus scraping a signalbox that carries calls and copies, and
// every metric a query names is there.
func TestDashboardsQueryRealMetrics(t *testing.T) {
	t.Parallel()
	testkit.Tool(t, "prometheus")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testConfig(t, t.TempDir(), true)
	cfg.CallsTopic = "CALLS"
	s := startServer(t, cfg)
	defer s.Shutdown()

	// Calls: named from a directory, one caller past its rate limit, one
	// malformed request.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/directories", `{"id":"corp","name":"Corp"}`},
		{"POST", "/api/v1/directories/corp/entries", `{"number":"2001","name":"Alice"}`},
		{"POST", "/api/v1/policies/default/rules", `{"enabled":true,"match":{"called":"911"},"action":{"decision":"permit"}}`},
		{"PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit","modify":{"calling_name":"directory:corp"}},"rate_limit":{"per_calling":{"calls":2,"window_seconds":60}}}`},
	} {
		if code, body := apiDo(t, s, c.method, c.path, c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	cucm := dialCUCM(t, s.CURRIAddr())
	testkit.WaitFor(t, 10*time.Second, "policy live", func() bool {
		_, body := cucm.do("POST", "/curri/default", xacmlRequest("2001", "5000"))
		return strings.Contains(body, "Alice")
	})
	for range 3 {
		cucm.do("POST", "/curri/default", xacmlRequest("3001", "911"))
	}
	cucm.do("POST", "/curri/default", "<Request>")

	// Copies: a feed to a probe, a Kafka feed, an xdr feed, NF traffic and
	// one record that is not a copy.
	synth := startProbe(t, ctx, probe.ModeSynthetic)
	createFeed(t, s, `{"name":"probe-a","type":"synthetic","sources":["SCP","NRF","SEPP"],"endpoint":"`+synth.Addr()+`"}`)
	createFeed(t, s, `{"name":"lake","type":"kafka","sources":["SCP","NRF","SEPP"],"topic":"COPIES-OUT"}`)
	createFeed(t, s, `{"name":"tx","type":"xdr","sources":["SCP","NRF","SEPP"],"topic":"XDR","xdr":{"timeout":"2s","linger":"100ms","rekey":true}}`)
	createFeed(t, s, `{"name":"tx-once","type":"xdr","sources":["SCP"],"topic":"XDR-ONCE","exactly_once":true}`)
	// 3,000 copies are ~1,100 transactions, of which nfsim fails 3 % from
	// a seed of its own each run: 300 copies (~110) had none in 1 run in
	// ~30, and the failure panels' series then never appeared.
	produceCopies(t, ctx, s.KafkaAddrs(), "dash", 2000, 3000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A record that is not a copy, and a response copy without :status
	// (incomplete: relayed by the kafka feed, skipped by the others).
	noStatus := `{"version":"1.0.0","metadata-list":{"correlation-id":"nostatus","timestamp":"1678705695995010066",` +
		`"message-direction":"RESPONSE_EGRESS","feed-source":{"nf-type":"SCP","nf-fqdn":"scp1.example"}},` +
		`"header-list":{"content-type":["application/json"]},"5g-sbi-message":"{}"}`
	for _, v := range []string{"not a copy", noStatus} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "SCP", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// An ingest request that is refused, and an HTTP request on the
	// Kafka port (refused by its broker).
	if resp, err := http.Post("http://"+s.IngestAddr()+"/v1/copies", "text/plain", strings.NewReader("x")); err != nil || resp.StatusCode != 415 {
		t.Fatalf("ingest of text: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := http.Get("http://" + s.KafkaAddrs()[0] + "/"); err != nil || resp.StatusCode != 400 {
		t.Fatalf("HTTP on the Kafka port: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	query := startPrometheus(t, s.HTTPAddr())
	var exprs []string
	for _, f := range []string{"signalbox-curri.json", "signalbox-director.json"} {
		raw, err := os.ReadFile(filepath.Join("../../deploy/grafana", f))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string `json:"uid"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
			t.Fatalf("%s: %v (uid %q, %d panels)", f, err, d.UID, len(d.Panels))
		}
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, strings.ReplaceAll(tg.Expr, "$instance", ".*"))
			}
		}
	}
	checkSeries(t, query, directorMetrics)
	metricName := regexp.MustCompile(`signalbox_[a-z0-9_]+`)
	for _, e := range exprs {
		var r struct {
			Status string `json:"status"`
		}
		if err := query("/api/v1/query?query="+url.QueryEscape(e), &r); err != nil || r.Status != "success" {
			t.Errorf("query %s: %v %s", e, err, r.Status)
		}
		for _, name := range metricName.FindAllString(e, -1) {
			testkit.WaitFor(t, 30*time.Second, name+" scraped (for "+e+")", func() bool {
				var r struct {
					Data []map[string]string `json:"data"`
				}
				return query("/api/v1/series?match[]="+url.QueryEscape(name), &r) == nil && len(r.Data) > 0
			})
		}
	}
}
