//go:build !race

package synthetic

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// Scale tests spend their time in an outside program, not in this
// process's concurrency: make test runs them (^TestScale) in its pass
// without the race detector.

// TestScaleTsharkHundredThousandFlows is issue 48's field-scale check: 100,000
// SEPP-like flows, each a request and its response, the whole set written
// twice (a re-delivery), through an encoder of the default flow table.
// Every flow stays open (none pushed out, none reopened on its ports), and
// stock tshark decodes every copy as HTTP/2 with no TCP analysis flag at
// all: no retransmission, out-of-order, reused port or lost segment.
func TestScaleTsharkHundredThousandFlows(t *testing.T) {
	testkit.Long(t, "400,000 copies through tshark: a minute or so")
	t.Parallel()
	tshark := testkit.Tool(t, "tshark")
	const flows = 100_000
	path := filepath.Join(t.TempDir(), "flows.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, EncoderOptions{})
	batch := make([]*nfcopy.Copy, 0, 2*flows)
	for i := range flows {
		req := request(i, nfcopy.RequestIngress, jsonBody(300))
		req.SourceIP, req.SourcePort = fmt.Sprintf("10.%d.%d.%d", 1+i>>16, (i>>8)&0xff, i&0xff), uint16(30000+i%30000)
		req.DestIP, req.DestPort = "10.200.0.1", 443
		resp := response(req, nfcopy.ResponseEgress, "200", jsonBody(100))
		batch = append(batch, req, resp)
	}
	for range 2 {
		if err := w.WriteBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.enc.Evicted(); n != 0 {
		t.Fatalf("%d flows pushed out of a table of 100,000", n)
	}
	cmd := exec.Command(tshark, "-r", path, "-n", "-T", "fields", "-E", "occurrence=a",
		"-e", "http2.headers.method", "-e", "http2.headers.status", "-e", "tcp.analysis.flags")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	methods, statuses, flagged, firstFlag := 0, 0, 0, ""
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		methods += len(strings.FieldsFunc(f[0], func(r rune) bool { return r == ',' }))
		statuses += len(strings.FieldsFunc(f[1], func(r rune) bool { return r == ',' }))
		if f[2] != "" {
			if flagged++; firstFlag == "" {
				firstFlag = line
			}
		}
	}
	if methods != 2*flows || statuses != 2*flows {
		t.Errorf("tshark decoded %d requests and %d responses as HTTP/2, want %d each", methods, statuses, 2*flows)
	}
	if flagged != 0 {
		t.Errorf("%d packets with tcp.analysis.flags, want none (first: %q)", flagged, firstFlag)
	}
}
