package synthetic

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestTshark decodes a file written by Writer with tshark, the reference
// HTTP/2 dissector, with no "decode as": every header field and body must
// come out as the copies have them, http and https copies alike.
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

// TestTsharkExpertInfo: 3,000 flows, each with a transaction written twice,
// through an encoder whose flow table holds only 1,024: flows are pushed out
// and come back as new connections (TestTsharkHundredThousandFlows is the
// default table, which holds them all). tshark's expert analysis must find no TCP
// sequence problem (retransmission, out-of-order, lost or unseen segment,
// window full) and no malformed or protocol error, and decode every copy
// as HTTP/2 without "decode as".
func TestTsharkExpertInfo(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	const flows, tableFlows = 3_000, 1_024
	path := filepath.Join(t.TempDir(), "flows.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, EncoderOptions{MaxFlows: tableFlows})
	copies := 0
	var first []*nfcopy.Copy
	for pass := 0; pass < 3; pass++ {
		if pass == 2 {
			// The first pass's very copies again, timestamps and all
			// (a replay, a re-delivery): their flows are opened again
			// as new connections, not as the old ones' retransmissions.
			if err := w.WriteBatch(first); err != nil {
				t.Fatal(err)
			}
			copies += len(first)
			continue
		}
		batch := make([]*nfcopy.Copy, 0, 2*flows)
		for i := 0; i < flows; i++ {
			req := request(pass*flows+i, nfcopy.RequestIngress, jsonBody(200+i%3000))
			req.SourceIP, req.SourcePort = fmt.Sprintf("10.%d.%d.%d", 1+i>>16, (i>>8)&0xff, i&0xff), uint16(40000+i%20000)
			req.DestIP, req.DestPort = "10.200.0.1", 443 // https on 443: must still decode
			setHeader(req, ":scheme", "https")
			setHeader(req, "x-http2-scheme", "https")
			resp := response(req, nfcopy.ResponseEgress, "200", jsonBody(100))
			resp.Headers = resp.Headers[:0:0] // as Netty leaves it: no stream id
			resp.Headers = append(resp.Headers, h(":status", "200"), h("content-type", "application/json"))
			batch = append(batch, req, resp)
		}
		if err := w.WriteBatch(batch); err != nil {
			t.Fatal(err)
		}
		copies += len(batch)
		if pass == 0 {
			first = batch
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// One pass: the HTTP/2 fields of every packet, then the expert summary
	// (notes and above; "Chat" items such as a SYN are left out).
	cmd := exec.Command(tshark, "-r", path, "-n", "-T", "fields", "-E", "occurrence=a",
		"-e", "http2.headers.method", "-e", "http2.headers.status", "-z", "expert,note")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	methods, statuses, reused := 0, 0, 0
	section := ""
	for _, line := range strings.Split(string(out), "\n") {
		if m, st, ok := strings.Cut(line, "\t"); ok && section == "" {
			methods += len(strings.FieldsFunc(m, func(r rune) bool { return r == ',' }))
			statuses += len(strings.FieldsFunc(st, func(r rune) bool { return r == ',' }))
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Errors ("), strings.HasPrefix(trimmed, "Warns ("), strings.HasPrefix(trimmed, "Notes ("),
			strings.HasPrefix(trimmed, "Chats ("), strings.HasPrefix(trimmed, "Comments ("):
			section = trimmed[:strings.IndexByte(trimmed, ' ')]
			continue
		case section == "" || trimmed == "" || strings.HasPrefix(trimmed, "=") || strings.HasPrefix(trimmed, "Frequency"):
			continue
		}
		// A new connection on the ports of one that closed earlier is
		// what a flow pushed out of the table and back looks like, and
		// what a real node reconnecting from the same port looks like.
		if section == "Notes" && strings.Contains(trimmed, "same ports as an earlier session") {
			n, _ := strconv.Atoi(strings.Fields(trimmed)[0])
			reused += n
			continue
		}
		// The FIN exchange of a flow pushed out, which tshark notes.
		if section == "Notes" && strings.Contains(trimmed, "connection closing") {
			continue
		}
		t.Errorf("tshark %s: %s", section, trimmed)
	}
	if methods != copies/2 || statuses != copies/2 {
		t.Errorf("tshark decoded %d requests and %d responses as HTTP/2, want %d each", methods, statuses, copies/2)
	}
	if reused == 0 {
		t.Errorf("no flow was pushed out of the table and reopened: the test does not test that")
	}
	t.Logf("%d flows, %d copies; %d reopened on the ports of an earlier session", flows, copies, reused)
}

// writePCAP writes copies through a Writer of the default options into a
// pcap file named name in a temporary directory, and returns its path.
func writePCAP(t *testing.T, name string, copies []*nfcopy.Copy) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(f, EncoderOptions{}).WriteBatch(copies); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSBIResponseFirstOnItsConnection: a response copied before its
// request (every tenth, 15 copies early), https with the response as Netty
// leaves it (no :scheme, no stream id), with and without addresses in the
// metadata: tshark finds each transaction's request and response on one
// TCP connection and one HTTP/2 stream.
func TestSBIResponseFirstOnItsConnection(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	const txns = 200
	var copies []*nfcopy.Copy
	early := 0
	for i := range txns {
		req := request(i, nfcopy.RequestIngress, jsonBody(200))
		setHeader(req, ":scheme", "https")
		setHeader(req, "x-http2-scheme", "https")
		req.Headers = append(req.Headers, h("x-txn", strconv.Itoa(i)))
		if i%2 == 0 {
			req.SourceIP, req.SourcePort = fmt.Sprintf("10.1.0.%d", 1+i%200), 0
			req.DestIP, req.DestPort = "10.200.0.1", 443
		}
		resp := response(req, nfcopy.ResponseEgress, "200", jsonBody(100))
		resp.Headers = []nfcopy.Header{h(":status", "200"), h("content-type", "application/json"), h("x-txn", strconv.Itoa(i))}
		if i%10 == 3 || i%10 == 4 {
			copies = slices.Insert(copies, max(0, len(copies)-15), resp)
			copies = append(copies, req)
			early++
			continue
		}
		copies = append(copies, req, resp)
	}
	path := writePCAP(t, "response-first.pcap", copies)
	out, err := exec.Command(tshark, "-r", path, "-n", "-Y", "http2.type == 1", "-T", "fields", "-E", "occurrence=a",
		"-E", "aggregator=|", "-e", "tcp.stream", "-e", "http2.streamid", "-e", "http2.header.name", "-e", "http2.header.value").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	where := map[string][]string{} // x-txn -> "tcp stream/http2 stream" of each copy
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		sid, _, _ := strings.Cut(f[1], "|")
		names, values := strings.Split(f[2], "|"), strings.Split(f[3], "|")
		for i, n := range names {
			if n == "x-txn" && i < len(values) {
				where[values[i]] = append(where[values[i]], f[0]+"/"+sid)
			}
		}
	}
	apart := 0
	for txn, w := range where {
		if len(w) != 2 {
			t.Errorf("transaction %s: %d copies decoded, want 2", txn, len(w))
		} else if w[0] != w[1] {
			apart++
			if apart <= 3 {
				t.Logf("transaction %s: request and response at %v (tcp.stream/http2.streamid)", txn, w)
			}
		}
	}
	if len(where) != txns || apart > 0 {
		t.Errorf("%d transactions decoded, %d of them (%d copied response first) with the response on another connection or stream", len(where), apart, early)
	}
}
