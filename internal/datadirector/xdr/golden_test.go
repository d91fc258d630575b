package xdr

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRecordGolden pins the record JSON (the xdr feed's wire format) of a
// cross-NF transaction with a duplicate, and of a timed-out one.
func TestRecordGolden(t *testing.T) {
	x, ck, _ := newTest(t, Config{Timeout: time.Second})
	x.Add(mk("warm", "NRF", "nrf-1", nfcopy.RequestIngress, 1, 0), nil)
	s, n := scp4("golden-1", 200), []*nfcopy.Copy{
		mk("golden-1", "NRF", "nrf-1", nfcopy.RequestIngress, 3000, 0),
		mk("golden-1", "NRF", "nrf-1", nfcopy.ResponseEgress, 7000, 200),
	}
	var out []Record
	for _, c := range []*nfcopy.Copy{s[0], s[1], n[0], n[0], n[1], s[2], s[3]} {
		out = x.Add(c, out)
	}
	out = x.Add(mk("golden-2", "SEPP", "sepp-1", nfcopy.RequestIngress, 5000, 0), out)
	ck.add(2 * time.Second)
	out = x.Expire(ck.Now(), out)
	if len(out) != 3 { // golden-1, then warm and golden-2 timed out
		t.Fatalf("%d records", len(out))
	}
	got, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "records.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("records differ from %s (run with -update after checking):\n%s", path, got)
	}
}

// FuzzAdd drives a correlator with copies built from the input: it must never
// panic, and every copy must end up in exactly one place: a record's copies
// or duplicates, the late counter or the dropped counters.
func FuzzAdd(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 2, 0, 2, 3, 0, 3, 4})
	f.Add([]byte{1, 1, 1, 1, 1, 4, 255, 2, 2, 1, 2, 2, 7, 0, 0, 200, 1, 1})
	f.Add(bytes.Repeat([]byte{3, 2, 1, 9}, 50))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := Config{Timeout: time.Second, MaxPending: 8, Shards: 2}
		if len(in)%2 == 1 {
			cfg.Linger = 100 * time.Millisecond
		}
		x, ck, _ := newTest(t, cfg)
		var out []Record
		adds := 0
		for i := 0; i+2 < len(in); i += 3 {
			op, a, b := in[i], in[i+1], in[i+2]
			if op == 255 {
				ck.add(time.Duration(a) * 10 * time.Millisecond)
				out = x.Expire(ck.Now(), out)
				continue
			}
			corr := string(rune('a' + op%12))
			if op%13 == 12 {
				corr = ""
			}
			nfs := []struct{ t, id string }{{"SCP", "scp-1"}, {"NRF", "nrf-1"}, {"SEPP", "sepp-1"}, {"PCF", ""}}
			nf := nfs[a%4]
			c := mk(corr, nf.t, nf.id, nfcopy.Direction(b%5), int64(b)*1000+int64(a), 200+int(a%4)*100)
			out = x.Add(c, out)
			adds++
		}
		out = x.Flush(out)
		if x.Pending() != 0 {
			t.Fatalf("pending %d after Flush", x.Pending())
		}
		n := int(testutil.ToFloat64(x.m.late) + testutil.ToFloat64(x.m.dropped) + testutil.ToFloat64(x.m.droppedDir))
		for _, r := range out {
			n += r.Copies + r.Duplicates
			if r.Copies != len(r.Hops) || r.Copies < 1 || r.Result == "" {
				t.Fatalf("bad record %+v", r)
			}
		}
		if n != adds {
			t.Fatalf("%d copies added, %d accounted for", adds, n)
		}
	})
}
