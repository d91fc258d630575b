package synthetic

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/testkit"
)

// diameterCopies decodes n generated DRA transactions (request, answer).
func diameterCopies(t testing.TB, n int, seed uint64) ([]*nfcopy.Copy, []nfsim.DiameterTxn) {
	t.Helper()
	g := nfsim.NewDiameterGen(seed)
	var out []*nfcopy.Copy
	var txns []nfsim.DiameterTxn
	for i := range n {
		tx, err := g.Next(1_700_000_000_000_000_000+int64(i)*1_000_000, 3_000_000)
		if err != nil {
			t.Fatal(err)
		}
		txns = append(txns, tx)
		for _, rec := range [][]byte{tx.Request, tx.Answer} {
			var c nfcopy.Copy
			if err := nfcopy.Decode(rec, &c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c.Clone())
		}
	}
	return out, txns
}

// TestTsharkDiameter: Diameter copies, among SBI ones in one stream, come
// out as Diameter over TCP 3868 that stock tshark decodes with no "decode
// as": every message whole, each answer paired with its request by
// tshark's own tracking, and no expert warning or error.
func TestTsharkDiameter(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	dia, txns := diameterCopies(t, 300, 3)
	// Interleave SBI copies: they stay HTTP/2 on their own flows.
	var copies []*nfcopy.Copy
	sbi := sampleCopies()
	for i, c := range dia {
		copies = append(copies, c)
		if i < len(sbi) {
			copies = append(copies, sbi[i])
		}
	}
	path := filepath.Join(t.TempDir(), "diameter.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, EncoderOptions{})
	if err := w.WriteBatch(copies[:len(copies)/2]); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch(copies[len(copies)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(tshark, "-r", path, "-n", "-2", "-Y", "diameter", "-T", "fields", "-E", "separator=|",
		"-e", "diameter.flags.request", "-e", "diameter.cmd.code", "-e", "diameter.applicationId",
		"-e", "diameter.hopbyhopid", "-e", "diameter.endtoendid", "-e", "diameter.answer_in", "-e", "diameter.answer_to",
		"-e", "tcp.dstport", "-e", "tcp.srcport", "-e", "tcp.payload", "-z", "expert,warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	msgs, answered, answers := 0, 0, 0
	section := ""
	for _, line := range strings.Split(string(out), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "Errors (") || strings.HasPrefix(trimmed, "Warns (") {
			section = trimmed
			t.Errorf("tshark expert: %s", trimmed)
			continue
		}
		if section != "" {
			if trimmed != "" && !strings.HasPrefix(trimmed, "=") && !strings.HasPrefix(trimmed, "Frequency") {
				t.Errorf("tshark %s: %s", section, trimmed)
			}
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 10 {
			continue
		}
		if f[7] != "3868" && f[8] != "3868" {
			t.Errorf("Diameter on ports %s→%s", f[8], f[7])
		}
		payload, err := hex.DecodeString(strings.ReplaceAll(f[9], ":", ""))
		if err != nil {
			t.Fatal(err)
		}
		want := dia[msgs]
		if !bytes.Equal(payload, want.Body) {
			t.Fatalf("message %d: tshark's payload (%d bytes) is not the copy's message (%d bytes)", msgs, len(payload), len(want.Body))
		}
		tx := txns[msgs/2]
		hbh, _ := strconv.ParseUint(strings.TrimPrefix(f[3], "0x"), 16, 32)
		e2e, _ := strconv.ParseUint(strings.TrimPrefix(f[4], "0x"), 16, 32)
		if f[1] != strconv.Itoa(int(tx.Command)) || f[2] != strconv.Itoa(int(tx.AppID)) || uint32(hbh) != tx.HopByHop || uint32(e2e) != tx.EndToEnd {
			t.Fatalf("message %d decoded as %q, want %+v", msgs, f[:5], tx)
		}
		isReq := f[0] == "1" || f[0] == "True"
		if isReq != (msgs%2 == 0) {
			t.Fatalf("message %d: request flag %q", msgs, f[0])
		}
		if isReq && f[5] != "" {
			answered++
		}
		if !isReq && f[6] != "" {
			answers++
		}
		msgs++
	}
	if msgs != len(dia) {
		t.Fatalf("tshark decoded %d Diameter messages, want %d", msgs, len(dia))
	}
	if answered != len(txns) || answers != len(txns) {
		t.Errorf("tshark paired %d requests and %d answers, want %d each", answered, answers, len(txns))
	}
}

// TestDiameterAnswerFirstOnItsConnection: an answer copied before its
// request (every tenth, 15 messages early) goes out on the request's TCP
// connection, as both copies name the same peers, by their addresses
// without ports (the client's port is then derived): tshark finds each
// transaction's two messages in one tcp.stream.
func TestDiameterAnswerFirstOnItsConnection(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	dia, txns := diameterCopies(t, 200, 5)
	for _, c := range dia {
		c.SourcePort, c.DestPort = 0, 0
	}
	var copies []*nfcopy.Copy
	early := 0
	for i := range txns {
		req, ans := dia[2*i], dia[2*i+1]
		if i%10 == 3 {
			at := max(0, len(copies)-15)
			copies = slices.Insert(copies, at, ans)
			copies = append(copies, req)
			early++
			continue
		}
		copies = append(copies, req, ans)
	}
	path := writePCAP(t, "answer-first.pcap", copies)
	out, err := exec.Command(tshark, "-r", path, "-n", "-Y", "diameter", "-T", "fields", "-E", "separator=|",
		"-e", "diameter.hopbyhopid", "-e", "tcp.stream").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	streams := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if hbh, st, ok := strings.Cut(line, "|"); ok {
			streams[hbh] = append(streams[hbh], st)
		}
	}
	apart := 0
	for hbh, st := range streams {
		if len(st) != 2 {
			t.Errorf("hop-by-hop %s: %d messages, want 2", hbh, len(st))
		} else if st[0] != st[1] {
			apart++
		}
	}
	if len(streams) != len(txns) || apart > 0 {
		t.Errorf("%d transactions, %d of them (%d copied answer first) with the answer on another connection", len(streams), apart, early)
	}
}
