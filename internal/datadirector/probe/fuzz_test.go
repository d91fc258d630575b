package probe

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenStream is a small deterministic synthetic stream: preface, server
// SETTINGS, copies of three NF types, a duplicate, a gap and a truncated frame.
func goldenStream(t testing.TB) []byte {
	var buf bytes.Buffer
	sw := newStreamWriter(t, &buf)
	sw.preface()
	ts := time.Unix(1700000000, 123456789)
	for i, nf := range []string{"SCP", "NRF", "SEPP", "SCP", "SCP"} {
		c := testCopy(nf, int64(i/3+1), 1500)
		if i == 4 {
			c = testCopy(nf, 4, 1500) // SCP 3 never comes
		}
		sw.packet(sw.copyFrames(c), ts, false)
	}
	sw.packet(sw.copyFrames(testCopy("NRF", 1, 1500)), ts, false) // duplicate
	full := sw.copyFrames(testCopy("SEPP", 2, 1500))
	sw.packet(full[:len(full)-1], ts, false)
	return buf.Bytes()
}

func summary(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "received=%d unique=%d duplicates=%d missing=%d invalid=%d control=%d no_seq=%d\n",
		r.Received, r.Unique, r.Duplicates, r.Missing, r.Invalid, r.Control, r.NoSeq)
	keys := make([]string, 0, len(r.InvalidReasons))
	for k := range r.InvalidReasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "invalid %s=%d\n", k, r.InvalidReasons[k])
	}
	for _, k := range sortedKeys(r.PerNF) {
		fmt.Fprintf(&b, "nf %s=%d\n", k, r.PerNF[k])
	}
	return b.String()
}

// TestGoldenStream checks the probe's reading of a stored stream
// (testdata/synthetic.pcap, also readable by tshark -r).
func TestGoldenStream(t *testing.T) {
	const pcapFile, goldFile = "testdata/synthetic.pcap", "testdata/synthetic.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pcapFile, goldenStream(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(pcapFile)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	s := newStats(0, "")
	if err := newConnDecoder(s).run(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	got := summary(s.report(ModeSynthetic))
	if *update {
		if err := os.WriteFile(goldFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// FuzzSyntheticStream: any byte stream ends in a report or an error, never a
// panic or a hang.
func FuzzSyntheticStream(f *testing.F) {
	raw, err := os.ReadFile("testdata/synthetic.pcap")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:24])
	f.Add(raw[:100])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newStats(0, "")
		_ = newConnDecoder(s).run(bytes.NewReader(b))
		r := s.report(ModeSynthetic)
		if r.Unique+r.Duplicates != r.Received {
			t.Fatalf("inconsistent report %+v", r)
		}
	})
}
