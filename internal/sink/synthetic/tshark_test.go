package synthetic

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestTshark decodes a file written by Writer with tshark, the reference
// HTTP/2 dissector, and compares every header field and body with the copies.
func TestTshark(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	big := request(20, nfcopy.RequestIngress, jsonBody(100_000))
	hugeHdr := request(21, nfcopy.RequestIngress, jsonBody(10))
	hugeHdr.Headers = append(hugeHdr.Headers, h("x-big", strings.Repeat("v", 20_000)))
	copies := append(sampleCopies(), big, response(big, nfcopy.ResponseEgress, "200", jsonBody(3000)), hugeHdr)

	path := filepath.Join(t.TempDir(), "feed.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, EncoderOptions{})
	// Two batches: flows must carry on across WriteBatch calls.
	if err := w.WriteBatch(copies[:4]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(copies[4:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(tshark, "-r", path, "-n",
		"-d", "tcp.port==8080,http2", "-d", "tcp.port==443,http2",
		"-T", "json", "-e", "http2.header.name", "-e", "http2.header.value", "-e", "http2.data.data", "-e", "http2.body.reassembled.length")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	var pkts []struct {
		Source struct {
			Layers map[string][]string `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(out, &pkts); err != nil {
		t.Fatalf("tshark output: %v", err)
	}
	var gotFields []string
	var gotData []byte
	for _, p := range pkts {
		names, values := p.Source.Layers["http2.header.name"], p.Source.Layers["http2.header.value"]
		if len(names) != len(values) {
			t.Fatalf("tshark gave %d names, %d values", len(names), len(values))
		}
		for i := range names {
			gotFields = append(gotFields, names[i]+": "+values[i])
		}
		// A body spread over several DATA frames shows as its full
		// (16384-byte) fragments, then, in place of its last fragment,
		// the reassembled body. Keep whole bodies only: no body in this
		// test is exactly 16384 bytes long.
		for _, d := range p.Source.Layers["http2.data.data"] {
			if len(d) == 2*h2MaxFrameSize {
				continue
			}
			b, err := hex.DecodeString(strings.ReplaceAll(d, ":", ""))
			if err != nil {
				t.Fatalf("data %q: %v", d, err)
			}
			gotData = append(gotData, b...)
		}
	}
	var wantFieldsAll []string
	var wantData []byte
	paths := 0
	for _, c := range copies {
		for _, f := range wantFields(c) {
			wantFieldsAll = append(wantFieldsAll, f.Name+": "+f.Value)
			if f.Name == ":path" {
				paths++
			}
		}
		wantData = append(wantData, c.Body...)
	}
	if strings.Join(gotFields, "\n") != strings.Join(wantFieldsAll, "\n") {
		t.Errorf("tshark header fields differ:\n got %d: %q\nwant %d: %q", len(gotFields), gotFields, len(wantFieldsAll), wantFieldsAll)
	}
	if !bytes.Equal(gotData, wantData) {
		t.Errorf("tshark DATA: %d bytes, want %d", len(gotData), len(wantData))
	}
	if paths != 7 {
		t.Errorf("test set has %d requests, want 7", paths)
	}
}
