//go:build !race

// The race detector makes sync.Pool drop items on purpose, so allocation
// counts are only meaningful without it.

package match

import "testing"

func TestMatchNoAlloc(t *testing.T) {
	rules := [][]string{
		{"prefix:1900", "", "", ""},
		{"", "", "originating", "prefix:SEP"},
		{"+14155550100", "", "", ""},
		{"pattern:1XXX", "prefix:9", "", ""},
		{"", "", "", ""},
	}
	m := build(t, rules, Options{})
	vals := []string{"12345", "912", "ORIGINATING", "SEP1"}
	m.Match(vals, nil)
	if n := testing.AllocsPerRun(200, func() { m.Match(vals, nil) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}
