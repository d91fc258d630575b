package callpolicy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

func corpDir(t testing.TB, fallback string) *directory.Table {
	t.Helper()
	b := directory.NewBuilder(&directory.Directory{ID: "corp", FallbackName: fallback}, 0)
	for _, e := range [][3]string{{"+19725550100", "Front desk", ""}, {"+1972555", "Acme Corp", "p"}, {"2001", "Alice", ""}} {
		if err := b.Add(e[0], e[1], e[2] == "p"); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestCallerNameFromDirectory(t *testing.T) {
	cfg := PolicyConfig{
		Policy: Policy{ID: "p", DefaultAction: Action{Decision: Permit, Modify: &Modify{CallingName: "directory:corp"}}},
		Rules: []Rule{
			{ID: 1, Enabled: true, Match: Match{Called: "911"}, Action: Action{Decision: Permit}},
			{ID: 2, Enabled: true, Match: Match{Called: "5000"},
				Action: Action{Decision: Divert, Destination: "6000", Modify: &Modify{CallingName: "directory:corp", CalledNumber: "6000"}}},
		},
	}
	reg := prometheus.NewRegistry()
	s, err := CompileWith([]PolicyConfig{cfg}, lib(t, corpDir(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(reg)
	e.Swap(s)
	tests := []struct {
		call     Call
		sent     string
		dryName  string
		nilModif bool
	}{
		{Call{Calling: "5550100", TransformedCalling: "+19725550100", Called: "1"}, `continue modify calling_name="Front desk"`,
			`name "Front desk" from directory corp, number +19725550100 (transformed_calling)`, false},
		{Call{Calling: "+19725559999", Called: "1"}, `continue modify calling_name="Acme Corp"`,
			`name "Acme Corp" from directory corp, prefix +1972555 (calling)`, false},
		{Call{Calling: "+33100000000", Called: "1"}, "continue", "calling number not in directory corp: name left as is", true},
		{Call{Calling: "2001", Called: "911"}, "continue", "", true}, // a rule without a lookup
		{Call{Calling: "2001", Called: "5000"}, `divert 6000 modify called_number=6000 calling_name="Alice"`,
			`name "Alice" from directory corp, number 2001 (calling)`, false},
	}
	for _, tt := range tests {
		dry, _ := e.DryRun("p", &tt.call, t0)
		d, ok := e.Evaluate("p", &tt.call, t0)
		if !ok || d.Action.Sent() != tt.sent || dry.Name != tt.dryName || (d.Action.Modify == nil) != tt.nilModif {
			t.Errorf("%+v: sent %q (dry run %q), want %q (%q)", tt.call, d.Action.Sent(), dry.Name, tt.sent, tt.dryName)
		}
		if d.Name != "" {
			t.Errorf("a live call builds no lookup text: %q", d.Name)
		}
	}
	// The shared actions are never changed by a lookup.
	if n := s.policies["p"].def.Modify.CallingName; n != "directory:corp" {
		t.Fatalf("default action changed: %q", n)
	}
	for res, want := range map[string]float64{"exact": 2, "prefix": 1, "miss": 1, "fallback": 0} {
		if got := testutil.ToFloat64(e.lookups.WithLabelValues("corp", res)); got != want {
			t.Errorf("lookups %s = %v, want %v", res, got, want)
		}
	}

	// A fallback name answers a miss.
	s2, err := CompileWith([]PolicyConfig{cfg}, lib(t, corpDir(t, "Outside caller")))
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(s2)
	d, _ := e.Evaluate("p", &Call{Calling: "+33100000000"}, t0)
	if d.Action.Sent() != `continue modify calling_name="Outside caller"` {
		t.Errorf("fallback: %q", d.Action.Sent())
	}

	// A policy naming a directory that is not there does not compile.
	if _, err := CompileWith([]PolicyConfig{cfg}, nil); err == nil ||
		!strings.Contains(err.Error(), `policy "p": default_action.modify.calling_name: directory "corp" does not exist`) {
		t.Errorf("missing directory: %v", err)
	}
	bad := Rule{ID: 3, Enabled: true, Action: Action{Decision: Permit, Modify: &Modify{CallingName: "directory:Bad Id"}}}
	if err := ValidateRule(&bad); err == nil || !strings.Contains(err.Error(), "action.modify.calling_name") {
		t.Errorf("bad directory id: %v", err)
	}
	bad.Action.Modify = &Modify{CalledName: "directory:corp"}
	if err := ValidateRule(&bad); err == nil || !strings.Contains(err.Error(), "called_name") {
		t.Errorf("called_name from a directory: %v", err)
	}
}

func BenchmarkEvaluateDirectoryName(b *testing.B) {
	bd := directory.NewBuilder(&directory.Directory{ID: "corp"}, 1_000_000)
	for i := range 1_000_000 {
		num := "+1972" + strings.Repeat("0", 7-len(itoa(i))) + itoa(i)
		if err := bd.Add(num, "Employee "+itoa(i), false); err != nil {
			b.Fatal(err)
		}
	}
	tb, err := bd.Build()
	if err != nil {
		b.Fatal(err)
	}
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: Action{Decision: Permit, Modify: &Modify{CallingName: "directory:corp"}}}}
	plain := PolicyConfig{Policy: Policy{ID: "q", DefaultAction: Action{Decision: Permit, Modify: &Modify{CallingName: "Reception"}}}}
	s, err := CompileWith([]PolicyConfig{cfg, plain}, lib(b, tb))
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(prometheus.NewRegistry())
	e.Swap(s)
	call := Call{Calling: "5550123", TransformedCalling: "+19720123456", Called: "2000"}
	for _, p := range []string{"q", "p"} {
		b.Run(map[string]string{"p": "directory", "q": "fixed_name"}[p], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := e.Evaluate(p, &call, t0); d.Action.Modify == nil {
					b.Fatal("no name")
				}
			}
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}
