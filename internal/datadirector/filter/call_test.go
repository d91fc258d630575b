package filter

import (
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
)

func TestCallFilter(t *testing.T) {
	denied := &callrecord.Record{Policy: "default", Decision: "deny", Step: "rate_limit", Calling: "+19725550101", LatencyMicros: 80}
	permitted := &callrecord.Record{Policy: "default", Decision: "permit", Step: "default", Calling: "+14085550100", LatencyMicros: 2500}
	for _, c := range []struct {
		expr        string
		deny, allow bool
	}{
		{`decision == "deny" && step == "rate_limit"`, true, false},
		{`decision != "deny"`, false, true},
		{`calling startsWith "+1972"`, true, false},
		{`latency_us > 1000`, false, true},
		{`policy == "default" && rule_id == 0`, true, true},
	} {
		f, err := CompileCall(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if f.Match(denied) != c.deny || f.Match(permitted) != c.allow {
			t.Errorf("%s: deny %v allow %v, want %v %v", c.expr, f.Match(denied), f.Match(permitted), c.deny, c.allow)
		}
	}
	for src, want := range map[string]string{
		`status >= 400`:        "unknown name status",
		`decision == `:         "unexpected token",
		`decision == "deny" +`: "unexpected token",
		``:                     "empty",
	} {
		if _, err := CompileCall(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CompileCall(%q) = %v, want %q", src, err, want)
		}
	}
}
