package directory

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
)

func build(t testing.TB, entries ...Entry) *Table {
	t.Helper()
	b := NewBuilder(&Directory{ID: "corp", FallbackName: "Unknown"}, len(entries))
	for i := range entries {
		e := entries[i]
		if _, err := e.Clean(); err != nil {
			t.Fatal(err)
		}
		if err := b.Add(e.Number, e.Name, e.IsPrefix()); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestLookup(t *testing.T) {
	tb := build(t,
		Entry{Number: "+19725550100", Name: "Front desk"},
		Entry{Number: "+1972555", Name: "Acme Corp", Match: Prefix},
		Entry{Number: "+19725551", Name: "Acme Sales", Match: Prefix},
		Entry{Number: "+1", Name: "North America", Match: Prefix},
		Entry{Number: "5550100", Name: "Desk (internal)"},
		Entry{Number: "2001", Name: "Alice"},
	)
	tests := []struct {
		calling, transformed string
		name, number, form   string
		prefix, ok           bool
	}{
		{"+19725550100", "", "Front desk", "+19725550100", "calling", false, true},
		{"", "+19725550100", "Front desk", "+19725550100", "transformed_calling", false, true},
		{"+19725550199", "", "Acme Corp", "+1972555", "calling", true, true},
		{"+19725551234", "", "Acme Sales", "+19725551", "calling", true, true}, // longest prefix
		{"+14155550000", "", "North America", "+1", "calling", true, true},
		{"+1972555", "", "Acme Corp", "+1972555", "calling", true, true}, // a prefix covers the number equal to it
		// Exact in either form beats any prefix.
		{"5550100", "+19725550199", "Desk (internal)", "5550100", "calling", false, true},
		{"9999", "+19725550100", "Front desk", "+19725550100", "transformed_calling", false, true},
		// Prefix of the raw number first, then of the globalized one.
		{"5550199", "+19725550199", "Acme Corp", "+1972555", "transformed_calling", true, true},
		{"2001", "2001", "Alice", "2001", "calling", false, true},
		{"4000", "", "", "", "", false, false},
		{"", "", "", "", "", false, false},
	}
	for _, tt := range tests {
		h, ok := tb.LookupCall(tt.calling, tt.transformed)
		if ok != tt.ok || h.Name != tt.name || h.Number != tt.number || h.Form != tt.form || h.Prefix != tt.prefix {
			t.Errorf("LookupCall(%q, %q) = %+v %v, want %s %s %s prefix=%v %v", tt.calling, tt.transformed, h, ok,
				tt.name, tt.number, tt.form, tt.prefix, tt.ok)
		}
	}
	if tb.Fallback() != "Unknown" || tb.Len() != 6 || tb.ID() != "corp" {
		t.Errorf("table: fallback %q len %d id %q", tb.Fallback(), tb.Len(), tb.ID())
	}
}

func TestBuildRefusesDuplicates(t *testing.T) {
	b := NewBuilder(&Directory{ID: "x"}, 0)
	_ = b.Add("123", "A", false)
	_ = b.Add("123", "B", true) // an exact and a prefix entry of one number may coexist
	_ = b.Add("123", "C", false)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), `"123" is in the directory twice`) {
		t.Fatalf("err %v", err)
	}
}

func TestClean(t *testing.T) {
	tests := []struct {
		in   Entry
		want Entry
		cut  bool
		err  string
	}{
		{Entry{Number: " +1 (212) 555-1212 ", Name: "  Alice  "}, Entry{Number: "+12125551212", Name: "Alice", Match: Exact}, false, ""},
		{Entry{Number: "1.212.555", Name: "NYC", Match: "PREFIX"}, Entry{Number: "1212555", Name: "NYC", Match: Prefix}, false, ""},
		{Entry{Number: "x12", Name: "A"}, Entry{}, false, `number: "x12" is not a number`},
		{Entry{Number: "", Name: "A"}, Entry{}, false, "number: empty"},
		{Entry{Number: "1", Name: ""}, Entry{}, false, "name: empty"},
		{Entry{Number: "1", Name: "a\x07b"}, Entry{}, false, "name: control character U+0007"},
		{Entry{Number: "1", Name: "a", Match: "regex"}, Entry{}, false, `match: "regex" is not exact or prefix`},
		{Entry{Number: "1", Name: strings.Repeat("é", 40)}, Entry{Number: "1", Name: strings.Repeat("é", 32), Match: Exact}, true, ""},
		{Entry{Number: "1", Name: "\xff"}, Entry{}, false, "name: not valid UTF-8"},
	}
	for _, tt := range tests {
		e := tt.in
		cut, err := e.Clean()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Clean(%+v) err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || e != tt.want || cut != tt.cut {
			t.Errorf("Clean(%+v) = %+v cut=%v %v, want %+v cut=%v", tt.in, e, cut, err, tt.want, tt.cut)
		}
	}
}

// The directories of pgiralt/ucm_name_lookup (testdata/SOURCES.md) import
// as they are and answer as that server's tests expect.
func TestUCMNameLookupCSV(t *testing.T) {
	for _, f := range []string{"ucm_name_lookup_phone_directory.csv", "ucm_name_lookup_test_directory.csv"} {
		raw, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		entries, st, err := ParseCSV(bytes.NewReader(raw), 0)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		tb := build(t, entries...)
		// test_routes.py: test_prefix_match_returns_display_name,
		// test_transformed_cgpn_fallback.
		for _, c := range []struct{ calling, transformed, name string }{
			{"+13129999999", "", "Chicago"},
			{"", "+12125551002", "Bob Smith"},
			{"+19194761234", "", "RTP, NC"},
			{"+12125559999", "", "New York City"},
		} {
			if h, ok := tb.LookupCall(c.calling, c.transformed); !ok || h.Name != c.name {
				t.Errorf("%s: %q/%q → %+v, want %q", f, c.calling, c.transformed, h, c.name)
			}
		}
		if st.Entries != len(entries) || st.Cut != 0 {
			t.Errorf("%s: stats %+v", f, st)
		}
	}
}

func TestParseCSV(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		err      string
	}{
		{"no header", "+12125551212,Alice\n+1212,NYC,prefix\n", 2, ""},
		{"header", "number,name,match\n+12125551212,Alice,exact\n", 1, ""},
		{"reordered header", "name,number\nAlice,+12125551212\n", 1, ""},
		{"blank lines", "\n+1,A\n\n", 1, ""},
		{"quoted comma", "1,\"Smith, John\"\n", 1, ""},
		{"bad number", "number,name\n1,A\n2,B\nx3,C\n", 0, `line 4: number: "x3" is not a number`},
		{"missing name", "1,A\n2\n", 0, "line 2: name: empty"},
		{"duplicate", "1,A\n2,B\n1,C\n", 0, `line 3: number: exact entry "1" already on line 1`},
		{"duplicate after normalizing", "+1 212,A\n+1-212,B\n", 0, `line 2: number: exact entry "+1212" already on line 1`},
		{"same number both kinds", "1,A\n1,B,prefix\n", 2, ""},
		{"unknown column", "number,name,city\n", 0, `line 1: column "city"`},
		{"header without name", "number,match\n", 0, "line 1: header needs a number and a name column"},
		{"too many columns", "1,A,exact,x\n", 0, "line 1: 4 columns"},
		{"bad quoting", "1,\"A\n", 0, "line 1:"},
	}
	for _, tt := range tests {
		got, _, err := ParseCSV(strings.NewReader(tt.in), 0)
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
	if _, _, err := ParseCSV(strings.NewReader("1,A\n2,B\n3,C\n"), 2); err == nil || !strings.Contains(err.Error(), "line 3: more than 2 entries") {
		t.Errorf("max: %v", err)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	in := []Entry{{Number: "+1212", Name: `New York, "NY"`, Match: Prefix}, {Number: "2001", Name: "Zoë", Match: Exact}}
	var buf bytes.Buffer
	w, err := NewCSVWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if err := w.Write(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	out, _, err := ParseCSV(&buf, 0)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("round trip: %+v %v", out, err)
	}
}

// naive is the obvious implementation the table is checked against.
type naive struct{ exact, prefix map[string]string }

func (n *naive) lookup(num string) (string, bool) {
	if v, ok := n.exact[num]; ok {
		return v, true
	}
	for l := len(num); l > 0; l-- {
		if v, ok := n.prefix[num[:l]]; ok {
			return v, true
		}
	}
	return "", false
}

func TestLookupAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nv := naive{exact: map[string]string{}, prefix: map[string]string{}}
	b := NewBuilder(&Directory{ID: "r"}, 0)
	digits := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteByte(byte('0' + r.IntN(4))) // few digits: prefixes collide often
		}
		return sb.String()
	}
	for i := range 20000 {
		num := digits(1 + r.IntN(10))
		name := fmt.Sprintf("n%d", i)
		prefix := r.IntN(3) == 0
		m := nv.exact
		if prefix {
			m = nv.prefix
		}
		if _, dup := m[num]; dup {
			continue
		}
		m[num] = name
		if err := b.Add(num, name, prefix); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for range 50000 {
		num := digits(1 + r.IntN(12))
		want, wok := nv.lookup(num)
		h, ok := tb.Lookup(num)
		if ok != wok || h.Name != want {
			t.Fatalf("Lookup(%q) = %q %v, want %q %v", num, h.Name, ok, want, wok)
		}
	}
}

func FuzzParseCSV(f *testing.F) {
	for _, s := range []string{"number,name,match\n+1212,NYC,prefix\n", "1,A\n1,B\n", "phone_number,display_name\n+1,\"a,b\"\n", "\"\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		entries, _, err := ParseCSV(strings.NewReader(in), 1000)
		if err != nil {
			return
		}
		// Whatever parses builds and finds every entry it holds.
		tb := build(t, entries...)
		for _, e := range entries {
			if e.IsPrefix() {
				continue
			}
			if h, ok := tb.Lookup(e.Number); !ok || h.Name != e.Name {
				t.Fatalf("%q: %+v %v", e.Number, h, ok)
			}
		}
	})
}

// million builds a directory of n exact numbers and n/100 prefixes, as
// a company directory with DID ranges would be.
func million(tb testing.TB, n int) *Table {
	b := NewBuilder(&Directory{ID: "big"}, n+n/100)
	var num [12]byte
	copy(num[:], "+1972")
	for i := range n {
		s := fmt.Appendf(num[:5], "%07d", i)
		if err := b.Add(string(s), fmt.Sprintf("Employee %d", i), false); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n / 100 {
		if err := b.Add(fmt.Sprintf("+1214%05d", i), fmt.Sprintf("Company %d", i), true); err != nil {
			tb.Fatal(err)
		}
	}
	t, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func BenchmarkLookupCall(b *testing.B) {
	tb := million(b, 1_000_000)
	numbers := []string{"+19720012345", "+12140012345", "+19990000000"} // exact, prefix, miss
	for _, n := range numbers {
		b.Run(n[:5], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, ok := tb.LookupCall("5551234", n); !ok && n[2] != '9' {
					b.Fatal("miss")
				}
			}
		})
	}
}

func BenchmarkBuildMillion(b *testing.B) {
	for b.Loop() {
		million(b, 1_000_000)
	}
}

// TestMillionResident measures the heap a 1,000,000-entry directory
// holds (the bound is 150 MB).
func TestMillionResident(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := million(t, 1_000_000)
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("1,010,000 entries: %d MB on the heap, table says %d MB", held>>20, tb.Bytes()>>20)
	if held > 150<<20 {
		t.Errorf("%d MB resident, want ≤ 150 MB", held>>20)
	}
	runtime.KeepAlive(tb)
}

// Changes applied with With answer as a table built with them does.
func TestWithAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	digits := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteByte(byte('0' + r.IntN(4)))
		}
		return sb.String()
	}
	nv := naive{exact: map[string]string{}, prefix: map[string]string{}}
	b := NewBuilder(&Directory{ID: "w"}, 0)
	for i := range 5000 {
		num, prefix := digits(1+r.IntN(9)), r.IntN(3) == 0
		m := nv.exact
		if prefix {
			m = nv.prefix
		}
		if _, dup := m[num]; dup {
			continue
		}
		m[num] = fmt.Sprintf("n%d", i)
		if err := b.Add(num, m[num], prefix); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		var ups []Entry
		var dels []Key
		touched := map[Key]bool{} // a change names a key once, as the store's diffs do
		for range 150 {
			num, prefix := digits(1+r.IntN(9)), r.IntN(3) == 0
			if touched[Key{num, prefix}] {
				continue
			}
			touched[Key{num, prefix}] = true
			m := nv.exact
			if prefix {
				m = nv.prefix
			}
			if r.IntN(2) == 0 {
				if _, ok := m[num]; ok {
					delete(m, num)
					dels = append(dels, Key{Number: num, Prefix: prefix})
				}
				continue
			}
			m[num] = fmt.Sprintf("r%d-%s", round, num)
			e := Entry{Number: num, Name: m[num], Match: Exact}
			if prefix {
				e.Match = Prefix
			}
			ups = append(ups, e)
		}
		var ok bool
		if tb, ok = tb.With(&Directory{ID: "w", Version: int64(round + 2)}, ups, dels); !ok {
			t.Fatalf("round %d: refused", round)
		}
		if tb.Len() != len(nv.exact)+len(nv.prefix) || tb.Version() != int64(round+2) {
			t.Fatalf("round %d: Len %d, want %d", round, tb.Len(), len(nv.exact)+len(nv.prefix))
		}
		for range 20000 {
			num := digits(1 + r.IntN(10))
			want, wok := nv.lookup(num)
			h, ok := tb.Lookup(num)
			if ok != wok || h.Name != want {
				t.Fatalf("round %d: Lookup(%q) = %q %v, want %q %v", round, num, h.Name, ok, want, wok)
			}
		}
	}
	// Too many changes for an overlay: build again.
	many := make([]Entry, 5000)
	for i := range many {
		many[i] = Entry{Number: fmt.Sprintf("9%07d", i), Name: "x", Match: Exact}
	}
	if _, ok := tb.With(&Directory{ID: "w"}, many, nil); ok {
		t.Error("an overlay of 5,000 changes on 5,000 entries was taken")
	}
}
