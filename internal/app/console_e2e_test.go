package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/signalbox/signalbox/internal/testkit"
)

const chromiumPath = "/usr/bin/chromium"

// TestConsoleInBrowser drives the operator console in headless Chromium
// against the real server (director on): sign in, create a rule, test a
// call, import a CSV block list, create a feed, watch a chart move while
// CURRI traffic flows, create a token, and check that a viewer's save is
// refused with the API's 403 and stores nothing. Every page is saved as a
// full-page PNG in $SIGNALBOX_TEST_OUT or <module>/testout/screenshots.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	testkit.Tool(t, chromiumPath)
	outDir := screenshotDir(t)

	cfg := testConfig(t, t.TempDir(), true)
	cfg.CallsTopic = "CALLS"
	cfg.NodeName = "console-node"
	s := startServer(t, cfg)
	t.Cleanup(func() { s.Shutdown() })
	base := "http://" + s.HTTPAddr()

	// The feed's probe: a TCP listener that reads and discards the stream.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	go func() {
		for {
			c, err := probe.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()

	code, b := apiDo(t, s, "POST", "/api/v1/tokens", `{"name":"e2e-viewer","role":"viewer"}`)
	if code != 201 {
		t.Fatalf("create viewer token: %d %s", code, b)
	}
	var viewer struct{ Token string }
	if err := json.Unmarshal(b, &viewer); err != nil || viewer.Token == "" {
		t.Fatalf("viewer token: %v %s", err, b)
	}

	b2 := startBrowser(t, outDir, 100*time.Second)
	bctx := b2.ctx

	// Background CURRI traffic for the live charts, bounded in time.
	trafficCtx, stopTraffic := context.WithCancel(bctx)
	var wg sync.WaitGroup
	defer func() { stopTraffic(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		sendCalls(trafficCtx, "http://"+s.CURRIAddr()+"/curri/default")
	}()

	// Sign in as admin.
	b2.do("open console", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin-form input")))
	b2.shot("signin")
	// The sign-in page says where the admin token is.
	if !strings.Contains(b2.evalString(`document.body.textContent`), "signalbox-data/admin-token") {
		t.Error("the sign-in page does not say where the admin token is kept")
	}
	b2.do("sign in",
		chromedp.SendKeys(chromedp.CSS("#signin-form input"), s.AdminToken()),
		chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#role")))
	if role := b2.text("#role"); role != "admin" {
		t.Fatalf("role shown %q, want admin", role)
	}

	// Overview: a chart fed by /api/v1/stats grows while calls flow.
	b2.do("overview charts", chromedp.WaitVisible(chromedp.CSS("#chart-calls")))
	b2.poll("calls chart has permit points", `Number(document.querySelector('#chart-calls').dataset.points) >= 2 && document.querySelector('#chart-calls').dataset.series.includes('permit')`, 20*time.Second)
	n1 := b2.eval(`Number(document.querySelector('#chart-calls').dataset.points)`)
	b2.poll("calls chart updates", fmt.Sprintf(`Number(document.querySelector('#chart-calls').dataset.points) > %v`, n1), 10*time.Second)
	b2.poll("health shown", `document.querySelector('#health') && document.querySelector('#health').textContent === 'Ready'`, 10*time.Second)
	b2.shot("overview")

	// Call policy: create a rule and see it listed.
	b2.do("open call policy", chromedp.Click(chromedp.CSS("#nav-policy")), chromedp.WaitVisible(chromedp.CSS("#rule-form")))
	b2.poll("rules loaded", `document.querySelector('#rules table') !== null`, 10*time.Second)
	// A bad pattern first: the API's message appears next to the field.
	b2.do("fill bad rule",
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="match.calling"] input`), "/[/"),
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="action.decision"] select`), "deny"),
		chromedp.Click(chromedp.CSS(`#rule-form button[type=submit]`)))
	b2.poll("field error shown", `document.querySelector('#rule-form [data-field="match.calling"] .field-error').textContent.length > 0`, 10*time.Second)
	b2.do("fill rule",
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="priority"] input`), "10"),
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="match.calling"] input`), "9725550199"),
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="action.reason"] select`), "blocked"),
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="description"] input`), "blocked from the console"),
		chromedp.Click(chromedp.CSS(`#rule-form button[type=submit]`)))
	b2.poll("rule listed", `document.querySelector('#rules').innerText.includes('9725550199')`, 10*time.Second)
	if code, b := apiDo(t, s, "GET", "/api/v1/policies/default/rules", ""); code != 200 || !strings.Contains(string(b), "9725550199") {
		t.Fatalf("rule not stored: %d %s", code, b)
	}

	// Test a call: the engine rebuilds after the change, so retry briefly.
	b2.do("fill test call",
		chromedp.SetValue(chromedp.CSS(`#test-form [data-field="calling"] input`), "9725550199"),
		chromedp.SetValue(chromedp.CSS(`#test-form [data-field="called"] input`), "5000"))
	decision := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b2.do("test call", chromedp.Click(chromedp.CSS(`#test-form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#eval-decision")))
		if decision = b2.text("#eval-decision"); decision == "deny" {
			break
		}
	}
	if decision != "deny" {
		t.Fatalf("test a call: decision %q, want deny", decision)
	}
	if why := b2.text("#eval-why"); why == "" {
		t.Errorf("test a call: no explanation shown")
	}

	// CSV import into the block list.
	csvPath := filepath.Join(t.TempDir(), "block.csv")
	if err := os.WriteFile(csvPath, []byte("calling,called,expires_at,note\n5550001,,,e2e spam\n5550002,,2099-01-01T00:00:00Z,e2e spam\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b2.do("import csv",
		chromedp.SetUploadFiles(chromedp.CSS(`#import-form input[type=file]`), []string{csvPath}),
		chromedp.Click(chromedp.CSS(`#import-form button[type=submit]`)))
	b2.poll("import reported", `document.querySelector('#import-form .form-status').textContent.includes('Imported 2')`, 10*time.Second)
	b2.poll("entries listed", `document.querySelector('#list-entries').innerText.includes('5550002')`, 10*time.Second)
	if code, b := apiDo(t, s, "GET", "/api/v1/policies/default/lists/block/entries", ""); code != 200 || !strings.Contains(string(b), "5550001") {
		t.Fatalf("entries not stored: %d %s", code, b)
	}
	// Policy settings: block-list hits divert to a screening number, and a
	// per-called-number limit; a bad destination is named first.
	b2.do("open policy settings", chromedp.Click(chromedp.CSS("#policy-settings summary")),
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="block_action.decision"] select`), "divert"),
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="block_action.destination"] input`), "not a number"),
		chromedp.Click(chromedp.CSS(`#policy-settings-form button[type=submit]`)))
	b2.poll("block action error", `document.querySelector('#policy-settings-form [data-field="block_action.destination"] .field-error').textContent.length > 0`, 10*time.Second)
	b2.do("fill policy settings",
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="block_action.destination"] input`), "8000"),
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="rate_limit.per_called.calls"] input`), "10"),
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="rate_limit.per_called.window_seconds"] input`), "60"),
		chromedp.SetValue(chromedp.CSS(`#policy-settings-form [data-field="rate_limit.per_called.block_seconds"] input`), "300"),
		chromedp.Click(chromedp.CSS(`#policy-settings-form button[type=submit]`)))
	b2.poll("policy settings saved", `document.querySelector('#policy-settings-form .form-status').textContent.includes('saved')`, 10*time.Second)
	if code, b := apiDo(t, s, "GET", "/api/v1/policies/default", ""); code != 200 ||
		!strings.Contains(string(b), `"block_action":{"decision":"divert","destination":"8000"}`) ||
		!strings.Contains(string(b), `"per_called":{"calls":10,"window_seconds":60,"block_seconds":300}`) {
		t.Fatalf("policy settings not stored: %d %s", code, b)
	}
	b2.do("live tail", chromedp.Click(chromedp.CSS("#tail")))
	b2.poll("call log shows calls", `document.querySelectorAll('#calls tbody tr td .badge').length > 0`, 10*time.Second)
	b2.shot("call-policy")
	// The same calls as the CALLS stream has them, with the node that answered.
	b2.do("calls stream", chromedp.SetValue(chromedp.CSS("#calls-source"), "stream"))
	b2.evalString(`(() => { document.querySelector('#calls-source').dispatchEvent(new Event('change')); return '' })()`)
	b2.poll("stream shows calls", `document.querySelector('#calls').innerText.includes('CALLS stream') && document.querySelector('#calls').innerText.includes('console-node')`, 10*time.Second)
	b2.do("back to the call log", chromedp.SetValue(chromedp.CSS("#calls-source"), "log"))
	b2.evalString(`(() => { document.querySelector('#calls-source').dispatchEvent(new Event('change')); return '' })()`)

	// Shared lists: a group with a nested group is refused when it loops.
	b2.do("open shared lists", chromedp.Click(chromedp.CSS("#nav-lists")), chromedp.WaitVisible(chromedp.CSS("#shared-lists")))
	b2.do("create group", chromedp.Click(chromedp.CSS("#page-lists details summary")),
		chromedp.SetValue(chromedp.CSS(`#list-form [data-field="id"] input`), "vip"),
		chromedp.SetValue(chromedp.CSS(`#list-form [data-field="name"] input`), "VIP callers"),
		chromedp.SetValue(chromedp.CSS(`#list-form [data-field="kind"] select`), "group"),
		chromedp.Click(chromedp.CSS(`#list-form button[type=submit]`)))
	b2.poll("group open", `document.querySelector('#shared-entry-form') !== null`, 10*time.Second)
	b2.do("group loop",
		chromedp.SetValue(chromedp.CSS(`#shared-entry-form [data-field="calling"] input`), "group:vip"),
		chromedp.Click(chromedp.CSS(`#shared-entry-form button[type=submit]`)))
	b2.poll("loop refused", `document.querySelector('#shared-entry-form [data-field="calling"] .field-error').textContent.includes('group loop')`, 10*time.Second)
	b2.do("group entry",
		chromedp.SetValue(chromedp.CSS(`#shared-entry-form [data-field="calling"] input`), "prefix:+1212555"),
		chromedp.Click(chromedp.CSS(`#shared-entry-form button[type=submit]`)))
	b2.poll("group entry listed", `document.querySelector('#shared-entries').innerText.includes('prefix:+1212555')`, 10*time.Second)
	b2.shot("shared-lists")

	// Directories: create one, import a CSV, search it, and see a call
	// named from it in "Test a call".
	b2.do("open directories", chromedp.Click(chromedp.CSS("#nav-directories")), chromedp.WaitVisible(chromedp.CSS("#directories")))
	b2.do("create directory", chromedp.Click(chromedp.CSS("#page-directories details summary")),
		chromedp.SetValue(chromedp.CSS(`#directory-form [data-field="id"] input`), "e2e"),
		chromedp.SetValue(chromedp.CSS(`#directory-form [data-field="name"] input`), "E2E callers"),
		chromedp.Click(chromedp.CSS(`#directory-form button[type=submit]`)))
	b2.poll("directory open", `document.querySelector('#dir-import-form') !== null`, 10*time.Second)
	dirCSV := filepath.Join(t.TempDir(), "directory.csv")
	if err := os.WriteFile(dirCSV, []byte("phone_number,display_name,match_type\n+19725550123,Dana Scully,exact\n+1972555,Acme Corp,prefix\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b2.do("import directory",
		chromedp.SetUploadFiles(chromedp.CSS(`#dir-import-form input[type=file]`), []string{dirCSV}),
		chromedp.Click(chromedp.CSS(`#dir-import-form button[type=submit]`)))
	b2.poll("directory import reported", `document.querySelector('#dir-import-form .form-status').textContent.includes('2 added')`, 10*time.Second)
	b2.poll("directory entries listed", `document.querySelector('#directory-entries').innerText.includes('Dana Scully')`, 10*time.Second)
	b2.do("search directory", chromedp.SendKeys(chromedp.CSS("#dir-search-name"), "acme"))
	b2.poll("directory search", `(() => { const t = document.querySelector('#directory-entries').innerText; return t.includes('Acme Corp') && !t.includes('Dana Scully'); })()`, 10*time.Second)
	b2.shot("directories")

	// Webhooks: create one, see its secret once, and send it a test event.
	hooked := make(chan string, 10000)
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // later steps' calls and alarms may send more events
		case hooked <- r.Header.Get("X-Signalbox-Event"):
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hookSrv.Close()
	b2.do("open webhooks", chromedp.Click(chromedp.CSS("#nav-webhooks")), chromedp.WaitVisible(chromedp.CSS("#webhooks")))
	b2.do("create webhook", chromedp.Click(chromedp.CSS("#page-webhooks details summary")),
		chromedp.SetValue(chromedp.CSS(`#webhook-form [data-field="name"] input`), "e2e-hook"),
		chromedp.SetValue(chromedp.CSS(`#webhook-form [data-field="url"] input`), hookSrv.URL+"/in"),
		chromedp.Click(chromedp.CSS(`#webhook-form button[type=submit]`)))
	b2.poll("secret shown once", `document.querySelector('#webhook-secret').textContent.includes('whsec_')`, 10*time.Second)
	b2.poll("webhook listed", `document.querySelector('#webhooks').innerText.includes('e2e-hook')`, 10*time.Second)
	b2.do("send test event", chromedp.Click(chromedp.CSS(`#webhooks tr[data-webhook="e2e-hook"] button.secondary`)))
	b2.poll("test delivered", `document.querySelector('#webhook-test-status').textContent.includes('delivered, HTTP 204')`, 10*time.Second)
	for got := ""; got != "test"; { // the test event, among what live calls send it
		select {
		case got = <-hooked:
		case <-time.After(5 * time.Second):
			t.Fatal("the webhook's endpoint got no test event")
		}
	}
	b2.shot("webhooks")

	// Traces: start one of a subscriber, see it running, stop it.
	b2.do("open traces", chromedp.Click(chromedp.CSS("#nav-traces")), chromedp.WaitVisible(chromedp.CSS("#trace-form")),
		chromedp.SetValue(chromedp.CSS(`#trace-form [data-field="supi"] input`), "234300000000001"),
		chromedp.Click(chromedp.CSS(`#trace-form button[type=submit]`)))
	b2.poll("trace running", `(() => { const r = document.querySelector('#traces tr[data-state="running"]'); return r && r.innerText.includes('imsi-234300000000001'); })()`, 10*time.Second)
	b2.poll("trace live view", `document.querySelector('#trace-live').innerText.includes('Copies caught by')`, 10*time.Second)
	b2.shot("traces")
	b2.do("stop trace", chromedp.Click(chromedp.CSS(`#traces tr[data-state="running"] button.danger`)))
	b2.poll("trace ended", `document.querySelector('#traces tr[data-state="ended"]') !== null`, 10*time.Second)
	if code, b := apiDo(t, s, "POST", "/api/v1/policies/default/rules",
		`{"priority":5,"enabled":true,"match":{"called":"7000"},"action":{"decision":"permit","modify":{"calling_name":"directory:e2e"}}}`); code != 201 {
		t.Fatalf("rule naming from the directory: %d %s", code, b)
	}
	b2.do("back to call policy", chromedp.Click(chromedp.CSS("#nav-policy")), chromedp.WaitVisible(chromedp.CSS("#test-form")),
		chromedp.SetValue(chromedp.CSS(`#test-form [data-field="calling"] input`), "5550123"),
		chromedp.SetValue(chromedp.CSS(`#test-form [data-field="transformed_calling"] input`), "+19725550123"),
		chromedp.SetValue(chromedp.CSS(`#test-form [data-field="called"] input`), "7000"))
	named := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b2.do("test a named call", chromedp.Click(chromedp.CSS(`#test-form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#eval-decision")))
		if named = b2.evalString(`(document.querySelector('#eval-name') || {}).textContent || ''`); strings.Contains(named, "Dana Scully") {
			break
		}
	}
	if !strings.Contains(named, `"Dana Scully" from directory e2e, number +19725550123 (transformed_calling)`) {
		t.Fatalf("test a call: caller name shown as %q", named)
	}

	// Director: a bad name is refused next to its field, then a synthetic
	// feed to the probe shows a live state (the probe listens: never
	// disconnected).
	b2.do("open director", chromedp.Click(chromedp.CSS("#nav-director")), chromedp.WaitVisible(chromedp.CSS("#feed-form")))
	b2.do("fill bad feed",
		chromedp.SetValue(chromedp.CSS(`#feed-form [data-field="name"] input`), "Bad Name"),
		chromedp.SetValue(chromedp.CSS(`#feed-form [data-field="sources"] input`), "SCP"),
		chromedp.SetValue(chromedp.CSS(`#feed-form [data-field="endpoint"] input`), probe.Addr().String()),
		chromedp.Click(chromedp.CSS(`#feed-form button[type=submit]`)))
	b2.poll("feed name error", `document.querySelector('#feed-form [data-field="name"] .field-error').textContent.includes('not a valid feed name')`, 10*time.Second)
	b2.do("fill feed",
		chromedp.SetValue(chromedp.CSS(`#feed-form [data-field="name"] input`), "e2e-probe"),
		chromedp.Click(chromedp.CSS(`#feed-form button[type=submit]`)))
	b2.poll("feed state shown", `(() => { const r = document.querySelector('#feeds tr[data-feed="e2e-probe"]'); return r && ['starting','connected'].includes(r.dataset.state); })()`, 15*time.Second)
	b2.poll("feed reader shown", `(() => { const r = document.querySelector('#feeds tr[data-feed="e2e-probe"]'); return r && r.textContent.includes('shared reader'); })()`, 15*time.Second)
	// An xdr feed made through the API appears in the recent-transactions panel.
	if code, b := apiDo(t, s, "POST", "/api/v1/feeds", `{"name":"e2e-tx","type":"xdr","sources":["SCP"],"topic":"E2E-XDR"}`); code != 201 {
		t.Fatalf("xdr feed: %d %s", code, b)
	}
	b2.poll("xdr records panel", `(() => { const o = document.querySelector('select option[value="e2e-tx"]'); return o && document.body.textContent.includes('No records delivered yet'); })()`, 15*time.Second)
	// NF traffic (3 % failures with ProblemDetails causes) fills the KPI
	// tables: transactions by service, failures by cause.
	produceCopies(t, context.Background(), s.KafkaAddrs(), "console", 2000, 4000)
	b2.poll("service KPIs", `document.querySelector('#xdr-kpis').innerText.includes('nudm') || document.querySelector('#xdr-kpis').innerText.includes('nnrf')`, 20*time.Second)
	b2.poll("failures by cause", `/USER_NOT_FOUND|NF_CONGESTION|SYSTEM_FAILURE|AUTHENTICATION_REJECTED|MANDATORY_IE_INCORRECT/.test(document.querySelector('#xdr-causes').innerText)`, 20*time.Second)
	b2.shot("director")
	// No card says its title twice (a heading, then a table caption
	// repeating it).
	if n := b2.eval(`Array.from(document.querySelectorAll('.card')).filter(c => { const h = c.querySelector('h2'); const cap = c.querySelector('caption:not(.sr-only)'); return h && cap && cap.textContent.trim().startsWith(h.textContent.trim()); }).length`); n != 0 {
		t.Errorf("%v card(s) repeat their heading as a table caption", n)
	}
	// The xdr feed's records are stored: search them by service on the
	// Traces page.
	b2.do("open traces for the records", chromedp.Click(chromedp.CSS("#nav-traces")), chromedp.WaitVisible(chromedp.CSS("#xdr-search-form")),
		chromedp.SetValue(chromedp.CSS(`#xdr-search-form [data-field="key"] select`), "service"),
		chromedp.SetValue(chromedp.CSS("#xdr-search"), "nnrf-nfm"),
		chromedp.Click(chromedp.CSS(`#xdr-search-form button[type=submit]`)))
	b2.poll("records found", `document.querySelector('#xdr-results').innerText.includes('nnrf-nfm') && document.querySelectorAll('#xdr-results tbody tr').length > 0`, 10*time.Second)
	b2.shot("xdr-search")
	// The copies of those transactions as one pcap: the button downloads it
	// (the API's answer is checked by TestXDRSearchPcap), and it is audited.
	b2.do("download the records' pcap", chromedp.Click(chromedp.CSS("#xdr-pcap")))
	b2.poll("pcap downloaded", `document.querySelector('#xdr-search-form .form-status').textContent === 'Downloaded.'`, 20*time.Second)
	if code, b := apiDo(t, s, "GET", "/api/v1/audit?since=-1h&resource=xdrs", ""); code != 200 || !strings.Contains(string(b), "service=nnrf-nfm") {
		t.Errorf("the console's pcap download is not audited: %d %.300s", code, b)
	}

	// Alarms, Settings (create a token: shown once), About.
	b2.do("open alarms", chromedp.Click(chromedp.CSS("#nav-alarms")), chromedp.WaitVisible(chromedp.CSS("#page-alarms table")))
	b2.shot("alarms")
	b2.do("create token", chromedp.Click(chromedp.CSS("#nav-settings")), chromedp.WaitVisible(chromedp.CSS("#token-form")),
		chromedp.SetValue(chromedp.CSS(`#token-form [data-field="name"] input`), "grafana"),
		chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#new-token-secret")))
	if secret := b2.text("#new-token-secret"); !strings.HasPrefix(secret, "sbx_") {
		t.Fatalf("new token shown as %q", secret)
	}
	b2.poll("token listed", `document.querySelector('#page-settings').innerText.includes('e2e-viewer') && document.querySelector('#page-settings').innerText.includes('grafana')`, 10*time.Second)
	// The audit log shows the changes made in this session, by whom.
	b2.poll("audit log", `(() => { const t = document.querySelector('#audit').innerText; return t.includes('create token') && t.includes('create directory') && t.includes('admin-token'); })()`, 10*time.Second)
	b2.shot("settings")
	b2.do("open about", chromedp.Click(chromedp.CSS("#nav-about")), chromedp.WaitVisible(chromedp.CSS("#version")))
	b2.shot("about")

	// A viewer can read but not save: the 403 is shown, nothing is stored.
	b2.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-form input")))
	b2.do("sign in as viewer",
		chromedp.SendKeys(chromedp.CSS("#signin-form input"), viewer.Token),
		chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#role")))
	if role := b2.text("#role"); role != "viewer" {
		t.Fatalf("role shown %q, want viewer", role)
	}
	b2.do("viewer opens policy", chromedp.Click(chromedp.CSS("#nav-policy")), chromedp.WaitVisible(chromedp.CSS("#rule-form")))
	b2.poll("viewer sees rules", `document.querySelector('#rules').innerText.includes('9725550199')`, 10*time.Second)
	b2.do("viewer saves rule",
		chromedp.SetValue(chromedp.CSS(`#rule-form [data-field="match.calling"] input`), "7775551234"),
		chromedp.Click(chromedp.CSS(`#rule-form button[type=submit]`)))
	b2.poll("403 shown", `document.querySelector('#rule-form .form-status').textContent.includes('403')`, 10*time.Second)
	b2.shot("viewer-refused")
	if code, b := apiDo(t, s, "GET", "/api/v1/policies/default/rules", ""); code != 200 || strings.Contains(string(b), "7775551234") {
		t.Fatalf("viewer's rule was stored: %d %s", code, b)
	}
}

// browser runs named steps, each bounded, failing the test with the step's
// name (and a screenshot) when one does not complete.
type browser struct {
	t   *testing.T
	ctx context.Context
	out string
}

const stepTimeout = 15 * time.Second

// startBrowser starts headless Chromium for the test; every step must end
// within total. Screenshots go to out.
func startBrowser(t *testing.T, out string, total time.Duration) *browser {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	// Start the browser on the long-lived context: a tab started under a
	// step's timeout context would close when that step ends.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelAll := context.WithTimeout(bctx, total)
	t.Cleanup(func() { cancelAll(); cancelBrowser(); cancelAlloc() })
	return &browser{t: t, ctx: ctx, out: out}
}

func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(step, err)
	}
}

func (b *browser) poll(step, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		b.fail(step, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return strings.TrimSpace(s)
}

// evalString evaluates a JavaScript expression of string value (or of a
// promise of one, which it awaits).
func (b *browser) evalString(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return v
}

func (b *browser) eval(expr string) float64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](expr))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return v
}

func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.out, name+".png"), png, 0o644); err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
}

func (b *browser) fail(step string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 5*time.Second)
	defer cancel()
	if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
		_ = os.WriteFile(filepath.Join(b.out, "FAILED-"+strings.ReplaceAll(step, " ", "-")+".png"), png, 0o644)
	}
	status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('.form-status,.field-error')).map(e => e.textContent).filter(Boolean).join(' | ')`))
	b.t.Fatalf("console step %q: %v (messages on page: %q)", step, err, status)
}

// screenshotDir is $SIGNALBOX_TEST_OUT or <module root>/testout/screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SIGNALBOX_TEST_OUT")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Fatalf("no go.mod above %s", wd)
			}
			root = parent
		}
		dir = filepath.Join(root, "testout", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		// A read-only checkout: the screenshots go with the test's temp dir.
		t.Logf("screenshots: %v; writing them under the test's temp dir", err)
		return t.TempDir()
	}
	return dir
}

// sendCalls posts CURRI requests, about 40 a second, until ctx ends.
func sendCalls(ctx context.Context, url string) {
	body := xacmlRequest("9725550101", "50102")
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "text/xml; charset=ISO-8859-1")
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
