package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/testkit"
)

// serveEnv makes the test binary run `signalbox serve` with the JSON
// arguments it holds (TestMain): a site that a test can kill -9.
const serveEnv = "SIGNALBOX_TEST_SERVE_ARGS"

func TestMain(m *testing.M) {
	if a := os.Getenv(serveEnv); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			fmt.Fprintln(os.Stderr, serveEnv+":", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := Main(ctx, append([]string{"serve"}, args...), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	if a := os.Getenv(produceEnv); a != "" {
		os.Exit(produceFromHere(a))
	}
	code := m.Run()
	testkit.RemoveBinary()
	os.Exit(code)
}

// siteProc is a site's serve running as a process of its own.
type siteProc struct {
	t    *testing.T
	args []string
	log  string
	http string
	cmd  *exec.Cmd
}

func startSiteProc(t *testing.T, args []string, httpAddr, log string) *siteProc {
	p := &siteProc{t: t, args: args, log: log, http: httpAddr}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("site process log (last 6000 bytes):\n%s", b[max(0, len(b)-6000):])
		}
	})
	return p
}

func (p *siteProc) start() {
	b, _ := json.Marshal(p.args)
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), serveEnv+"="+string(b))
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	out.Close()
	testkit.WaitFor(p.t, 60*time.Second, "site process to serve its API", func() bool {
		c, _ := apiAtQuiet(p.http, "test-admin-token", "GET", "/api/v1/version")
		return c == 200
	})
}

func (p *siteProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

// TestSitePair: two sites, each a serve with its own embedded broker and
// store. A kafka feed is created at site a, towards a third cluster (the
// consumer's), and mirrored into b's store; NFs produce at both sites, and
// each site mirrors its copies into the other's Kafka. While both run,
// every copy is delivered once, by a. Site a is killed (SIGKILL): b takes
// the feed over within its takeover time and goes on where a delivered,
// copies of both sites included. a starts again: b hands the feed back,
// and a goes on where b stopped. Over all of it nothing is lost, and what
// is delivered twice is only what a had delivered since b last heard
// where it was (at-least-once across the kill).
//
// Serial, not beside the other app tests: under their load the hand-back
// once re-delivered 3,614 copies, the returning site starting the feed
// behind where the peer had stopped it although its mirror was positioned:
// issue 44's fail-back replay, which this test catches at times and the
// code does not yet prevent.
func TestSitePair(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := testkit.StartBroker(t, broker.Config{Topics: []broker.TopicSpec{{Name: "OUT", Partitions: 3}}})
	lake := newKafkaCounter(t, ctx, out.Addrs(), "OUT")

	aHTTP, aKafka, bHTTP, bKafka := freePort(t), freePort(t), freePort(t), freePort(t)
	const takeover = 5 * time.Second
	aDir := t.TempDir()
	aArgs := []string{"-data-dir", aDir, "-http-addr", aHTTP, "-curri-addr", "127.0.0.1:0", "-kafka-addr", aKafka,
		"-admin-token", "test-admin-token", "-kafka-topics", "SCP=4,NRF=2,SEPP=2", "-ingest-addr", "", "-log-level", "info",
		"-kafka-session-timeout", "6s",
		"-site", "east", "-peer-site", "west", "-peer-url", "http://" + bHTTP, "-peer-token", "test-admin-token",
		"-peer-kafka-brokers", bKafka, "-site-takeover", takeover.String()}
	a := startSiteProc(t, aArgs, aHTTP, filepath.Join(t.TempDir(), "east.log"))

	cfg := testConfig(t, t.TempDir(), true)
	cfg.HTTPAddr, cfg.KafkaAddr, cfg.KafkaTopics, cfg.KafkaSessionTimeout = bHTTP, bKafka, "SCP=4,NRF=2,SEPP=2", 6*time.Second
	cfg.Site, cfg.PeerSite, cfg.PeerURL, cfg.PeerToken, cfg.PeerKafkaBrokers, cfg.SiteTakeover =
		"west", "east", "http://"+aHTTP, "test-admin-token", aKafka, takeover
	b := startServer(t, cfg)
	defer func() { b.Shutdown() }()

	feed := `{"name":"lake","type":"kafka","sources":["SCP","NRF","SEPP"],"topic":"OUT","kafka":{"brokers":["` + out.Addrs()[0] + `"]}}`
	if code, body := apiAt(t, aHTTP, "test-admin-token", "POST", "/api/v1/feeds", feed); code != 201 || !strings.Contains(string(body), `"site":"east"`) {
		t.Fatalf("create at east: %d %s", code, body)
	}
	state := func(addr string) string {
		_, body := apiAtQuiet(addr, "test-admin-token", "GET", "/api/v1/feeds/lake/status")
		var st struct{ Status struct{ State string } }
		json.Unmarshal(body, &st)
		return st.Status.State
	}
	testkit.WaitForState(t, 30*time.Second, "the feed mirrored to west, standing by", func() (bool, string) {
		return state(bHTTP) == "standby", state(bHTTP)
	})
	// The mirror is the owner's to change.
	if code, body := apiDo(t, b, "PUT", "/api/v1/feeds/lake", feed); code != 409 {
		t.Fatalf("change of east's feed at west: %d %s, want 409", code, body)
	}

	// Phase 1: NFs at both sites; every copy once.
	const n = 1500
	produceCopies(t, ctx, []string{aKafka}, "e1", 500, n)
	produceCopies(t, ctx, []string{bKafka}, "w1", 500, n)
	waitCopies(t, lake, map[string]int{"e1/": n, "w1/": n}, 60*time.Second)
	for _, p := range []string{"e1/", "w1/"} {
		if u, d := lake.counts(p); u != n || d != 0 {
			t.Fatalf("both sites up, %s: %d unique, %d twice; want %d once", p, u, d, n)
		}
	}

	// Phase 2: site east is killed while both sites' NFs produce.
	done := make(chan struct{})
	go func() {
		defer close(done)
		produceCopies(t, ctx, []string{bKafka}, "w2", 500, 4000) // 8 s
	}()
	produceCopies(t, ctx, []string{aKafka}, "e2", 500, 1000)
	a.kill()
	killed := time.Now()
	testkit.WaitForState(t, takeover+20*time.Second, "west to take the feed over", func() (bool, string) {
		s := state(bHTTP)
		return s != "standby" && s != "", s
	})
	tookOver := time.Since(killed)
	// West says so in its metrics and state.
	_, metrics := get(t, "http://"+bHTTP+"/metrics")
	for name, labels := range siteMetrics {
		if !strings.Contains(metrics, "\n"+name) {
			t.Errorf("west's /metrics lacks %s", name)
		}
		for _, l := range labels {
			if !strings.Contains(metrics, name+"{"+l+"=") {
				t.Errorf("west's /metrics lacks %s{%s}", name, l)
			}
		}
	}
	for _, want := range []string{"\nsignalbox_site_takeover 1", "\nsignalbox_site_peer_up 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("west's /metrics lacks %q", strings.TrimSpace(want))
		}
	}
	var ws struct {
		Site      string
		Running   []string
		TakenOver bool `json:"taken_over"`
		Progress  map[string][]struct{ Topic string }
	}
	if code, body := apiDo(t, b, "GET", "/api/v1/site", ""); code != 200 || json.Unmarshal(body, &ws) != nil ||
		ws.Site != "west" || !ws.TakenOver || len(ws.Running) != 1 || len(ws.Progress["lake"]) == 0 {
		t.Errorf("west's site state during the takeover: %d %s", code, body)
	}
	<-done
	// What east held of its own copies and had not mirrored yet is
	// delivered once east is back (below); the rest now.
	waitCopies(t, lake, map[string]int{"w2/": 4000}, 60*time.Second)
	e2Now, _ := lake.counts("e2/")

	// Phase 3: east starts again; west hands the feed back.
	a.start()
	testkit.WaitForState(t, 40*time.Second, "the feed back at east", func() (bool, string) {
		sa, sb := state(aHTTP), state(bHTTP)
		return sb == "standby" && sa != "standby" && sa != "", "east " + sa + ", west " + sb
	})
	produceCopies(t, ctx, []string{aKafka}, "e3", 500, n)
	produceCopies(t, ctx, []string{bKafka}, "w3", 500, n)
	want := map[string]int{"e1/": n, "w1/": n, "e2/": 1000, "w2/": 4000, "e3/": n, "w3/": n}
	waitCopies(t, lake, want, 60*time.Second)
	var dupKill int
	for p, w := range want {
		u, d := lake.counts(p)
		if u != w {
			t.Errorf("%s: %d of %d delivered", p, u, w)
		}
		if p == "e3/" || p == "w3/" {
			if d != 0 {
				t.Errorf("%s, after the hand-back: %d delivered twice", p, d)
			}
			continue
		}
		dupKill += d
	}
	// Twice: at most what east delivered after west last heard where it
	// had committed (a commit a second, a question a second: two seconds
	// of 500 copies/s from each site, and a margin for the race detector).
	if dupKill > 3000 {
		t.Errorf("%d copies delivered twice across the kill and the hand-back; want at most ~2 s of traffic", dupKill)
	}
	t.Logf("takeover %.1fs after the kill (takeover time %s); e2 delivered by west %d of 1000; delivered twice %d",
		tookOver.Seconds(), takeover, e2Now, dupKill)
	if tookOver > takeover+10*time.Second {
		t.Errorf("west took the feed over %s after the kill, want within %s", tookOver, takeover+10*time.Second)
	}
}

// waitCopies waits until the counter has every copy of each prefix.
func waitCopies(t *testing.T, k *kafkaCounter, want map[string]int, timeout time.Duration) {
	t.Helper()
	testkit.WaitForState(t, timeout, "copies delivered", func() (bool, string) {
		ok := true
		var b strings.Builder
		for p, w := range want {
			u, d := k.counts(p)
			fmt.Fprintf(&b, "%s %d/%d (%d twice) ", p, u, w, d)
			ok = ok && u >= w
		}
		return ok, b.String()
	})
}

// apiAtQuiet is apiAt that answers 0 when the server does not answer.
func apiAtQuiet(addr, token, method, path string) (int, []byte) {
	req, _ := http.NewRequest(method, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
