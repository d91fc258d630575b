package extcap

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), args, "signalbox test", &out, &errOut)
	return out.String(), err
}

// TestProtocol: what Wireshark reads of the program, sentence by sentence.
func TestProtocol(t *testing.T) {
	out, err := run(t, "--extcap-interfaces", "--extcap-version=4.0.17")
	if err != nil || !strings.HasPrefix(out, "extcap {version=signalbox test}{help=") ||
		!strings.Contains(out, "\ninterface {value=signalbox}{display=signalbox live SBI copies}\n") {
		t.Errorf("--extcap-interfaces: %v\n%s", err, out)
	}
	if out, err := run(t, "--extcap-interface", "signalbox", "--extcap-dlts"); err != nil || out != "dlt {number=1}{name=EN10MB}{display=Ethernet (synthetic packets of the NFs' messages)}\n" {
		t.Errorf("--extcap-dlts: %v\n%s", err, out)
	}
	out, err = run(t, "--extcap-interface", "signalbox", "--extcap-config")
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"--url", "--token", "--token-file", "--sources", "--filter", "--supi"} {
		if !strings.Contains(out, "{call="+call+"}") {
			t.Errorf("--extcap-config lacks %s:\n%s", call, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		// A sentence is {key=value} blocks: a brace inside a value breaks it.
		depth := 0
		for _, c := range l {
			switch c {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth < 0 || depth > 1 {
				t.Errorf("a sentence Wireshark cannot split: %s", l)
				break
			}
		}
	}
	if _, err := run(t, "--extcap-interface", "eth0", "--extcap-dlts"); err == nil || !strings.Contains(err.Error(), `unknown interface "eth0"`) {
		t.Errorf("another interface: %v", err)
	}
}

// TestCaptureAnswers: the API's answers as the capture ends with them.
func TestCaptureAnswers(t *testing.T) {
	var gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery, gotAuth = r.URL.RawQuery, r.Header.Get("Authorization")
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("Content-Type", "application/vnd.tcpdump.pcap")
			w.Write([]byte("PCAP"))
		case "Bearer badfilter":
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"line 1, column 4: unexpected token","field":"filter"}`))
		default:
			w.WriteHeader(401)
			w.Write([]byte(`{"error":"unknown token"}`))
		}
	}))
	defer srv.Close()
	fifo := filepath.Join(t.TempDir(), "out.pcap")
	capture := func(token string, extra ...string) error {
		_, err := run(t, append([]string{"--extcap-interface", "signalbox", "--capture", "--fifo", fifo, "--url", srv.URL, "--token", token}, extra...)...)
		return err
	}
	if err := capture("good", "--sources", "SCP,NRF", "--filter", "status >= 400", "--extcap-capture-filter", "service == \"nudm-sdm\"", "--supi", "imsi-1234567"); err != nil {
		t.Fatalf("capture: %v", err)
	}
	if b, _ := os.ReadFile(fifo); string(b) != "PCAP" || gotAuth != "Bearer good" ||
		gotQuery != "filter=%28status+%3E%3D+400%29+%26%26+%28service+%3D%3D+%22nudm-sdm%22%29&sources=SCP%2CNRF&supi=imsi-1234567" {
		t.Errorf("the stream %q, asked %q with %q", b, gotQuery, gotAuth)
	}
	if err := capture("wrong"); err == nil || !strings.Contains(err.Error(), "the API refused the token (401): unknown token") {
		t.Errorf("a wrong token: %v", err)
	}
	if err := capture("badfilter", "--extcap-capture-filter", "tcp port 80"); err == nil || !strings.Contains(err.Error(), "not a BPF filter") {
		t.Errorf("a BPF capture filter: %v", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("good\n"), 0o600)
	if _, err := run(t, "--extcap-interface", "signalbox", "--capture", "--fifo", fifo, "--url", srv.URL, "--token-file", tokenFile); err != nil || gotAuth != "Bearer good" {
		t.Errorf("a token file: %v, sent %q", err, gotAuth)
	}
	t.Setenv("SIGNALBOX_TOKEN", "")
	if _, err := run(t, "--extcap-interface", "signalbox", "--capture", "--fifo", fifo, "--url", srv.URL); err == nil || !strings.Contains(err.Error(), "no API token") {
		t.Errorf("no token: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := run(t, "--extcap-interface", "signalbox", "--capture", "--fifo", fifo, "--url", "http://"+addr, "--token", "good"); err == nil || !strings.Contains(err.Error(), "cannot reach the signalbox API") {
		t.Errorf("an unreachable API: %v", err)
	}
}

func TestWiresharkVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"TShark (Wireshark) 4.0.17 (Git v4.0.17 packaged as 4.0.17-0+deb12u3).\n\nCopyright": {4, 0},
		"TShark (Wireshark) 4.2.5 (v4.2.5-0-g4aa814ac25a1).":                                 {4, 2},
	} {
		if ma, mi, ok := wiresharkVersion(in); !ok || ma != want[0] || mi != want[1] {
			t.Errorf("%q: %d.%d %v", in, ma, mi, ok)
		}
	}
}
