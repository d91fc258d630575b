package synthetic

import (
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestAppendLiteralField decodes the hand-written fields with x/net's HPACK
// decoder: static-table names, new names, and lengths past the 7-bit prefix.
func TestAppendLiteralField(t *testing.T) {
	tests := []struct{ name, value string }{
		{":path", "/nudm-ueau/v1/suci-0-234/security-information/generate-auth-data"},
		{":method", "POST"},
		{"www-authenticate", "x"},
		{"content-type", ""},
		{"x-signalbox-seq", "m1/SCP/123"},
		{"3gpp-sbi-target-apiroot", strings.Repeat("h", 127)},
		{strings.Repeat("n", 200), strings.Repeat("v", 70000)},
	}
	var block []byte
	for _, tt := range tests {
		block = appendLiteralField(block, tt.name, tt.value)
	}
	var got []hpack.HeaderField
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f) })
	dec.SetMaxStringLength(1 << 20)
	if _, err := dec.Write(block); err != nil {
		t.Fatal(err)
	}
	if err := dec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tests) {
		t.Fatalf("decoded %d fields, want %d", len(got), len(tests))
	}
	for i, tt := range tests {
		if got[i].Name != tt.name || got[i].Value != tt.value || got[i].Sensitive {
			t.Errorf("field %d: got %.40q=%.40q, want %.40q=%.40q", i, got[i].Name, got[i].Value, tt.name, tt.value)
		}
	}
}
