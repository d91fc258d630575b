package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestMain removes the binary testkit.Binary built, if it built one.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinary()
	os.Exit(code)
}

// TestRunCURRIEndToEnd starts the real server as a child process, loads
// every rule kind through the API, drives it at a modest fixed rate with a
// rule-set swap in the middle, and checks the report.
func TestRunCURRIEndToEnd(t *testing.T) {
	const rate, seconds = 500, 3
	rep, stdout := runCURRIBench(t,
		"-exact", "150", "-regex", "40", "-prefix", "5", "-pattern", "5", "-allow", "20", "-block", "20",
		"-rate", "500", "-conns", "8", "-warmup", "1s", "-duration", "3s", "-reload-every", "2s")
	if rep.TransportErrors != 0 || rep.Non200 != 0 || rep.Indeterminate != 0 || rep.Unsent != 0 || rep.WarmupErrors != 0 {
		t.Errorf("errors: transport %d, non-200 %d, Indeterminate %d, unsent %d, warmup %d (first: %s)",
			rep.TransportErrors, rep.Non200, rep.Indeterminate, rep.Unsent, rep.WarmupErrors, rep.FirstError)
	}
	if want := int64(rate * seconds); rep.Calls < want*97/100 || rep.Calls > want*103/100 {
		t.Errorf("calls = %d, want ~%d", rep.Calls, want)
	}
	if rep.Decisions["Permit"] == 0 || rep.Decisions["Deny"] == 0 {
		t.Errorf("decisions %v: want both Permit and Deny", rep.Decisions)
	}
	// What each kind of call must be told, given the rules the bench loads.
	only := map[string]string{"regex": "Deny", "prefix": "Deny", "block_list": "Deny",
		"pattern": "Permit", "allow_list": "Permit", "no_rule": "Permit"}
	for class, dec := range only {
		got := rep.ByClass[class]
		if got[dec] == 0 || len(got) != 1 {
			t.Errorf("%s calls decided %v, want %s only", class, got, dec)
		}
	}
	if ex := rep.ByClass["exact"]; ex["Deny"] == 0 || ex["Deny"] < 5*ex["Permit"] {
		t.Errorf("exact calls decided %v, want mostly Deny (every tenth rule diverts)", ex)
	}
	if rep.Latency.P50 <= 0 || rep.Latency.P99 < rep.Latency.P50 || rep.Latency.Max < rep.Latency.P99 {
		t.Errorf("latency %+v", rep.Latency)
	}
	if rep.Load == nil || rep.Load.RulesLiveMs <= 0 {
		t.Errorf("load %+v", rep.Load)
	}
	if s := rep.Server; s == nil || s.CPUSeconds <= 0 || s.RSSPeakBytes <= 0 || s.CallsPerCoreSecond <= 0 {
		t.Errorf("server stats %+v", rep.Server)
	}
	if len(rep.Reloads) != 1 || rep.Reloads[0].Error != "" || rep.Reloads[0].LiveMs <= 0 || rep.Reloads[0].Calls == 0 {
		t.Errorf("reloads %+v, want one clean swap", rep.Reloads)
	}
	for _, s := range []string{"latency", "calls/s per core", "reference", "58 calls/s per core"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

// TestRunCURRIOverMutualTLS: HTTPS with client certificates as CUCM uses
// it, every connection re-handshaking during the run; no call may fail.
func TestRunCURRIOverMutualTLS(t *testing.T) {
	rep, _ := runCURRIBench(t, "-rules", "100", "-allow", "10", "-block", "10",
		"-rate", "400", "-conns", "4", "-warmup", "500ms", "-duration", "3s",
		"-tls", "-client-cert", "-reconnect-every", "1s")
	if !strings.HasPrefix(rep.Target, "https://") || !strings.Contains(rep.TLS, "mutual") {
		t.Errorf("target %s, tls %q", rep.Target, rep.TLS)
	}
	if rep.TransportErrors != 0 || rep.Non200 != 0 || rep.Indeterminate != 0 || rep.WarmupErrors != 0 || rep.ReconnectErrors != 0 {
		t.Errorf("errors: transport %d non-200 %d Indeterminate %d warmup %d reconnect %d (first: %s)",
			rep.TransportErrors, rep.Non200, rep.Indeterminate, rep.WarmupErrors, rep.ReconnectErrors, rep.FirstError)
	}
	if rep.Reconnects < 8 {
		t.Errorf("%d reconnects in 3.5 s of 4 connections re-handshaking every second, want >= 8", rep.Reconnects)
	}
	if rep.Calls < 1100 {
		t.Errorf("%d calls, want ~1200", rep.Calls)
	}
}

// runCURRIBench runs `bench curri` against the real binary with args and
// returns its JSON report and its table.
func runCURRIBench(t *testing.T, args ...string) (curriReport, string) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := RunCURRI(ctx, append([]string{"-server-bin", testkit.Binary(t), "-json", jsonPath}, args...), &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep curriReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	return rep, stdout.String()
}
