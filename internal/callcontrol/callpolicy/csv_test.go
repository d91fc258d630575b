package callpolicy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestParseEntriesCSV(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		err      string
	}{
		{"header", "calling,called,expires_at,note\n+15550001,,,spam\nprefix:+1666,911,2026-12-31T23:59:59Z,\"a, b\"\n", 2, ""},
		{"no header, short rows", "+15550001\npattern:1900XXXXXXX,\n", 2, ""},
		{"empty", "", 0, ""},
		{"bad calling", "calling\n1\n2\n3\n4\n5\nx12\n", 0, "line 7: calling: unexpected 'x'"},
		{"missing calling", "calling,called\n,123\n", 0, "line 2: calling: required"},
		{"regex refused", "regex:^1\n", 0, "line 1: calling: regex: not allowed"},
		{"bad expiry", "1,,tomorrow\n", 0, `line 1: expires_at: "tomorrow" is not RFC 3339`},
		{"too many columns", "1,2,,n,,extra\n", 0, "line 1: 6 columns"},
		{"entry action", "1,,,n,\"{\"\"decision\"\":\"\"divert\"\",\"\"destination\"\":\"\"8000\"\"}\"\n", 1, ""},
		{"bad action", "1,,,n,\"{\"\"decision\"\":\"\"x\"\"}\"\n", 0, "line 1: action.decision"},
		{"action not JSON", "1,,,n,divert\n", 0, "line 1: action: not a JSON action"},
		{"bad quoting", "1,\"2\n", 0, "line 1:"},
	}
	for _, tt := range tests {
		got, err := ParseEntriesCSV(strings.NewReader(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || len(got) != tt.n {
			t.Errorf("%s: %d entries, %v", tt.name, len(got), err)
		}
	}
}

func TestWriteEntriesCSVGolden(t *testing.T) {
	exp := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	entries := []ListEntry{
		{Calling: "+15550001", Note: "robocaller"},
		{Calling: "prefix:+1666", Called: "911", ExpiresAt: &exp, Note: `quoted "note", with comma`},
		{Calling: "pattern:1900XXXXXXX", Action: &Action{Decision: Divert, Destination: "8000", Reason: "chaperone"}},
	}
	var buf bytes.Buffer
	if err := WriteEntriesCSV(&buf, entries); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "entries.golden.csv")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got\n%s\nwant\n%s", buf.Bytes(), want)
	}
	back, err := ParseEntriesCSV(bytes.NewReader(want))
	if err != nil || len(back) != 3 || back[1].Note != entries[1].Note || !back[1].ExpiresAt.Equal(exp) || back[1].Called != "911" ||
		back[2].Action == nil || *back[2].Action != *entries[2].Action || back[0].Action != nil {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

func FuzzParseEntriesCSV(f *testing.F) {
	f.Add("calling,called,expires_at,note\n+15550001,,,spam\nprefix:+1666,911,2026-12-31T23:59:59Z,\"a, b\"\n")
	f.Add("pattern:9.1[2-9]XX!,\n")
	f.Fuzz(func(t *testing.T, in string) {
		entries, err := ParseEntriesCSV(strings.NewReader(in))
		if err != nil {
			return
		}
		for i := range entries {
			if err := ValidateEntry(&entries[i]); err != nil {
				t.Fatalf("accepted invalid entry %+v: %v", entries[i], err)
			}
		}
		// Write then parse again: a fixed point after one round.
		var b1 bytes.Buffer
		if err := WriteEntriesCSV(&b1, entries); err != nil {
			t.Fatal(err)
		}
		again, err := ParseEntriesCSV(bytes.NewReader(b1.Bytes()))
		if err != nil {
			t.Fatalf("re-parse of own output: %v\n%s", err, b1.Bytes())
		}
		var b2 bytes.Buffer
		if err := WriteEntriesCSV(&b2, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
			t.Fatalf("not stable:\n%s\n%s", b1.Bytes(), b2.Bytes())
		}
	})
}
