package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/expr-lang/expr"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// FuzzCompileMatch: Compile refuses with an *Error or compiles; Match never
// panics, and agrees with the unrewritten evaluation where both run.
func FuzzCompileMatch(f *testing.F) {
	f.Add(`method == "POST"`)
	copies := []*nfcopy.Copy{reqCopy(), respCopy()}
	f.Fuzz(func(t *testing.T, src string) {
		flt, err := Compile(src)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("%q: error %T %v, want *Error", src, err, err)
			}
			return
		}
		rf, _ := CompileRecord(src) // must not panic either
		_ = rf
		for _, c := range copies {
			got, gerr := flt.Eval(c)
			// Constant header names are lowered by the filter, not by the
			// oracle; skip those.
			if strings.Contains(strings.ToLower(src), "header") || strings.Contains(src, "$env") {
				continue
			}
			env := oracleEnv(c)
			p, err := expr.Compile(src, expr.Env(env), expr.AsBool())
			if err != nil {
				continue
			}
			out, err := expr.Run(p, env)
			if err != nil || gerr != nil {
				continue
			}
			if out.(bool) != got {
				t.Fatalf("%q on %s: filter %v, oracle %v", src, c.Direction, got, out)
			}
		}
	})
}
