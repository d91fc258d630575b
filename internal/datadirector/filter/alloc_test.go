//go:build !race

// Allocation counts only without -race: sync.Pool drops items under the race
// detector.
package filter

import "testing"

func TestMatchZeroAllocs(t *testing.T) {
	c := reqCopy()
	for _, ex := range examples[:5] {
		f, err := Compile(ex.src)
		if err != nil {
			t.Fatal(err)
		}
		f.Match(c)
		if n := testing.AllocsPerRun(200, func() { f.Match(c) }); n != 0 {
			t.Errorf("%s: %v allocs per Match, want 0", ex.src, n)
		}
	}
}
