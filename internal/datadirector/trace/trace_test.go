package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPrepare(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   Trace
		whom string
		expr string
	}{
		{Trace{SUPI: "234300000000001", Minutes: 5}, "imsi-234300000000001", `supi == "imsi-234300000000001"`},
		{Trace{GPSI: "+447700900123", Minutes: 5}, "msisdn-447700900123", `gpsi == "msisdn-447700900123"`},
		{Trace{PEI: "351234567890123", Minutes: 5}, "imei-351234567890123", `pei == "imei-351234567890123"`},
		{Trace{Filter: `nf_type == "SEPP"`, Minutes: 5, LookbackMinutes: 2}, `filter nf_type == "SEPP"`,
			`(nf_type == "SEPP") && timestamp >= 1796198280000000000`},
	} {
		tr := c.in
		if err := tr.Prepare(Limits{}, now); err != nil {
			t.Fatalf("%+v: %v", c.in, err)
		}
		if tr.Whom() != c.whom || tr.expr() != c.expr || !tr.End.Equal(now.Add(5*time.Minute)) || !strings.HasPrefix(tr.ID, "tr-20261202t080000-") {
			t.Errorf("%+v -> whom %q expr %q end %s id %s", c.in, tr.Whom(), tr.expr(), tr.End, tr.ID)
		}
		if !tr.Running(now) || tr.Running(tr.End) {
			t.Errorf("running: %v at start, %v at the end", tr.Running(now), tr.Running(tr.End))
		}
	}
	for _, bad := range []Trace{{Minutes: 5}, {SUPI: "1", GPSI: "2", Minutes: 5}, {SUPI: "abc", Minutes: 5}, {SUPI: "imsi-23430", Minutes: 5},
		{SUPI: "234300000000001", Minutes: 241}, {SUPI: "234300000000001", Minutes: 5, LookbackMinutes: 61}} {
		if err := bad.Prepare(Limits{}, now); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// Finished pcap files read as one capture: one global header, every
// file's packets; files being written (hidden) are left out.
func TestWritePCAP(t *testing.T) {
	dir := t.TempDir()
	var empty bytes.Buffer
	if err := WritePCAP(&empty, dir); err != nil || empty.Len() != pcapHeaderLen {
		t.Fatalf("no files: %d bytes, %v", empty.Len(), err)
	}
	hdr := empty.Bytes()
	for i, body := range []string{"AAAA", "BBBB"} {
		name := filepath.Join(dir, "trace.x.pcap-2026120208000"+string(rune('0'+i))+"-1.pcap")
		if err := os.WriteFile(name, append(append([]byte(nil), hdr...), body...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".trace.x.pcap-20261202080009-1.pcap.tmp"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WritePCAP(&out, dir); err != nil {
		t.Fatal(err)
	}
	if want := string(hdr) + "AAAABBBB"; out.String() != want {
		t.Errorf("got %q", out.String())
	}
	if Size(dir, "pcap") != int64(2*(pcapHeaderLen+4)) {
		t.Errorf("size %d", Size(dir, "pcap"))
	}
}
