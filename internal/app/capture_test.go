package app

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestLiveCaptureInTshark: signalbox as a Wireshark capture interface, as a
// user sets it up — `signalbox extcap install` into a private Wireshark
// configuration, the interface's options saved in its preferences — with
// an unmodified tshark, against the binary's serve. tshark lists the
// interface; a capture decodes every copy produced while it runs (200
// request/response pairs, counted exactly: warm-up copies first prove the
// capture reads) as HTTP/2 with no TCP analysis flag; a wrong token and a
// BPF capture filter end the capture at once with the reason in tshark's
// output; GET /api/v1/capture refuses a viewer and a second capture beyond
// -capture-max; and when tshark stops, nothing is left running.
func TestLiveCaptureInTshark(t *testing.T) {
	t.Parallel()
	tshark := testkit.Tool(t, "tshark")
	kcat := testkit.Tool(t, "kcat")
	dir := t.TempDir()
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0",
		"-curri-addr", "127.0.0.1:0", "-kafka-addr", "127.0.0.1:0", "-ingest-addr", "",
		"-admin-token", "test-admin-token", "-kafka-topics", "SCP=3,NRF=1", "-capture-max", "1"}, filepath.Join(dir, "serve.log"))
	api := serve.http()
	metric := func(name string) float64 {
		_, m := get(t, "http://"+api+"/metrics")
		return metricValue(m, name)
	}

	// A private Wireshark: its personal configuration (and, for 4.1 and
	// later, home) in the test's directory.
	wsConf, home := filepath.Join(dir, "wireshark"), filepath.Join(dir, "home")
	env := append(os.Environ(), "WIRESHARK_CONFIG_DIR="+wsConf, "HOME="+home, "SIGNALBOX_TOKEN=")
	install := testkit.Command(testkit.Binary(t), "extcap", "install")
	install.Env = env
	out, err := install.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "installed ") {
		t.Fatalf("signalbox extcap install: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := testkit.CommandContext(ctx, tshark, args...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	read := func(args ...string) string { // tshark's output alone, for a capture file
		t.Helper()
		cmd := testkit.Command(tshark, args...)
		cmd.Env = env
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
		}
		return string(b)
	}
	if out, err := run("-D"); err != nil || !strings.Contains(out, "signalbox (signalbox live SBI copies)") {
		t.Fatalf("tshark -D does not list the interface: %v\n%s", err, out)
	}
	// The options as Wireshark saves them: extcap.<interface>.<option,
	// its letters and digits>.
	tokenFile := filepath.Join(dir, "token")
	prefs := func(token string) {
		must(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
		must(t, os.WriteFile(filepath.Join(wsConf, "preferences"), []byte(fmt.Sprintf(
			"extcap.signalbox.url: http://%s\nextcap.signalbox.tokenfile: %s\nextcap.signalbox.sources: SCP,NRF\n", api, tokenFile)), 0o600))
	}

	// A wrong token ends the capture at once, saying why.
	prefs("not-a-token")
	start := time.Now()
	if out, err := run("-i", "signalbox", "-a", "duration:30", "-w", filepath.Join(dir, "refused.pcapng")); err == nil ||
		!strings.Contains(out, "the API refused the token (401)") || time.Since(start) > 20*time.Second {
		t.Fatalf("a wrong token: tshark %v after %s\n%s", err, time.Since(start), out)
	}
	// So does a BPF capture filter, which is not a signalbox filter.
	prefs("test-admin-token")
	if out, err := run("-i", "signalbox", "-f", "tcp port 8080", "-a", "duration:30", "-w", filepath.Join(dir, "bpf.pcapng")); err == nil ||
		!strings.Contains(out, "not a BPF filter") {
		t.Fatalf("a BPF capture filter: tshark %v\n%s", err, out)
	}

	// The capture: tshark runs until stopped.
	live := filepath.Join(dir, "live.pcapng")
	var tsOut bytes.Buffer
	capture := testkit.Command(tshark, "-i", "signalbox", "-w", live)
	capture.Env, capture.Stdout, capture.Stderr = env, &tsOut, &tsOut
	must(t, capture.Start())
	exited := make(chan error, 1)
	go func() { exited <- capture.Wait() }()
	testkit.WaitForState(t, 30*time.Second, "the capture to start", func() (bool, string) {
		return metric("signalbox_captures_active") == 1, tsOut.String()
	})

	// What a second capture and a viewer get.
	code, body := apiAt(t, api, "test-admin-token", "GET", "/api/v1/capture", "")
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "-capture-max 1") {
		t.Errorf("a second capture: %d %s", code, body)
	}
	_, tok := apiAt(t, api, "test-admin-token", "POST", "/api/v1/tokens", `{"name":"noc","role":"viewer"}`)
	viewer := between(string(tok), `"token":"`, `"`)
	if code, body := apiAt(t, api, viewer, "GET", "/api/v1/capture", ""); code != http.StatusForbidden {
		t.Errorf("a viewer's capture: %d %s", code, body)
	}

	// Warm-up copies (NRF) until the capture has written some: from then
	// on, every copy produced is in it.
	brokers := serve.ls.Kafka
	base := metric("signalbox_capture_copies_total")
	testkit.WaitForState(t, 30*time.Second, "the capture to write warm-up copies", func() (bool, string) {
		kcatProduceAt(t, kcat, brokers, "NRF", sbiPair(fmt.Sprintf("warm-%d", time.Now().UnixNano()), 0, true, time.Now().UnixNano()))
		time.Sleep(200 * time.Millisecond)
		return metric("signalbox_capture_copies_total") > base, tsOut.String()
	})
	var warm float64 // once the warm-up copies in flight are written
	testkit.WaitFor(t, 10*time.Second, "the warm-up copies to settle", func() bool {
		before := metric("signalbox_capture_copies_total")
		time.Sleep(300 * time.Millisecond)
		warm = metric("signalbox_capture_copies_total")
		return warm == before
	})
	const n = 200
	now := time.Now().UnixNano()
	var lines []string
	for i := range n {
		lines = append(lines, sbiPair(fmt.Sprintf("cap-%d", i), i, true, now+int64(i)*1_000_000)...)
	}
	kcatProduceAt(t, kcat, brokers, "SCP", lines, "-p", "0") // one partition: requests before responses
	testkit.WaitForState(t, 30*time.Second, "the capture to write every copy", func() (bool, string) {
		got := metric("signalbox_capture_copies_total") - warm
		return got >= 2*n, fmt.Sprintf("%v of %d", got, 2*n)
	})
	time.Sleep(500 * time.Millisecond) // tshark writes what it read

	// Wireshark stops a capture with SIGINT to tshark, which stops the
	// extcap; the server's capture ends with it.
	must(t, capture.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("tshark did not stop\n%s", tsOut.String())
	}
	testkit.WaitFor(t, 10*time.Second, "the server's capture to end", func() bool { return metric("signalbox_captures_active") == 0 })

	decoded := read("-r", live, "-n", "-Y", "http2.type == 1", "-T", "fields", "-E", "occurrence=f",
		"-e", "tcp.stream", "-e", "http2.streamid", "-e", "http2.headers.path", "-e", "http2.headers.status")
	requests, responses := map[string]bool{}, 0
	for _, line := range strings.Split(decoded, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		switch key := f[0] + "/" + f[1]; {
		case strings.HasSuffix(f[2], "generate-auth-data"):
			requests[key] = true
		case f[3] != "" && requests[key]:
			responses++
		}
	}
	// The warm-up copies the capture wrote are pairs of the same kind.
	if want := n + int(warm-base)/2; len(requests) != want || responses != want {
		t.Errorf("the capture decodes %d requests and %d responses on their streams, want %d each (%d and %v warm-up copies)\n%s",
			len(requests), responses, want, 2*n, warm-base, tsOut.String())
	}
	if out := read("-r", live, "-n", "-Y", "tcp.analysis.flags"); strings.TrimSpace(out) != "" {
		t.Errorf("TCP analysis flags in the capture:\n%.2000s", out)
	}
	if d := metric("signalbox_capture_dropped_total"); d != 0 {
		t.Errorf("%v copies dropped", d)
	}
	code, body = apiAt(t, api, "test-admin-token", "GET", "/api/v1/audit?resource=captures", "")
	if code != 200 || !strings.Contains(string(body), "live capture") || !strings.Contains(string(body), "copies=") {
		t.Errorf("the capture is not in the audit log: %d %.500s", code, body)
	}
}

// kcatProduceAt produces lines, one record each, into topic of brokers.
func kcatProduceAt(t *testing.T, kcat, brokers, topic string, lines []string, args ...string) {
	t.Helper()
	cmd := exec.Command(kcat, append([]string{"-P", "-b", brokers, "-t", topic}, args...)...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, b)
	}
}

// between is what s holds between the first from and the next to.
func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, to)
	return v
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
