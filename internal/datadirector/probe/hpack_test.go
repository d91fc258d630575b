package probe

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

type fieldList []string

func (l *fieldList) field(name, value string) { *l = append(*l, name+": "+value) }

// decodeBoth decodes blocks in turn (one dynamic table across them) with the
// probe's decoder and x/net's, and reports where they disagree.
func decodeBoth(blocks [][]byte) string {
	mine := newHPACKDecoder(64 << 10)
	var theirs fieldList
	ref := hpack.NewDecoder(64<<10, func(f hpack.HeaderField) { theirs.field(f.Name, f.Value) })
	for i, b := range blocks {
		var got fieldList
		err := mine.decode(b, &got)
		theirs = theirs[:0]
		_, rerr := ref.Write(b)
		if rerr == nil {
			rerr = ref.Close()
		}
		if (err == nil) != (rerr == nil) {
			return fmt.Sprintf("block %d %x: error %v, x/net %v", i, b, err, rerr)
		}
		if err != nil {
			return "" // the connection's HPACK state is then undefined
		}
		if strings.Join(got, "\n") != strings.Join(theirs, "\n") {
			return fmt.Sprintf("block %d %x: fields\n%s\nx/net\n%s", i, b, strings.Join(got, "\n"), strings.Join(theirs, "\n"))
		}
	}
	return ""
}

// FuzzHPACK holds the probe's HPACK decoder to x/net's: for any two blocks
// decoded one after the other, the same accepted or refused, and the same
// fields in order.
func FuzzHPACK(f *testing.F) {
	enc := func(fields ...hpack.HeaderField) []byte {
		var b strings.Builder
		e := hpack.NewEncoder(&b)
		for _, hf := range fields {
			_ = e.WriteField(hf)
		}
		return []byte(b.String())
	}
	f.Add(enc(hpack.HeaderField{Name: ":method", Value: "POST"}, hpack.HeaderField{Name: "x-signalbox-seq", Value: "run/SCP/1"}),
		enc(hpack.HeaderField{Name: "x-signalbox-seq", Value: "run/SCP/2"}, hpack.HeaderField{Name: ":status", Value: "201"}))
	f.Add([]byte{0x3f, 0xe1, 0x1f, 0x82}, []byte{0x20, 0x40, 0x01, 'a', 0x01, 'b', 0xbe})
	f.Add([]byte{0x00, 0x03, 'a', 'b', 'c', 0x83, 0xff, 0xff, 0xff}, []byte{0x80})
	f.Add([]byte{0x10, 0x01, 'x', 0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, []byte{})
	f.Add(appendTestField(nil, "x-signalbox-pad", strings.Repeat("p", 2500)), []byte{0x84, 0x86})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if d := decodeBoth([][]byte{a, b}); d != "" {
			t.Fatal(d)
		}
	})
}

// TestHPACKAgainstXNet runs the fuzz seeds and blocks x/net's encoder makes
// with indexing on, Huffman strings and table size changes.
func TestHPACKAgainstXNet(t *testing.T) {
	var blocks [][]byte
	var b strings.Builder
	e := hpack.NewEncoder(&b)
	for i := range 200 {
		if i%37 == 0 {
			e.SetMaxDynamicTableSizeLimit(uint32(4096 - i*10))
			e.SetMaxDynamicTableSize(uint32(4096 - i*10))
		}
		b.Reset()
		for j := range 1 + i%9 {
			_ = e.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-h%d", (i+j)%13), Value: strings.Repeat("v", (i*j)%300),
				Sensitive: j%5 == 4})
		}
		_ = e.WriteField(hpack.HeaderField{Name: ":path", Value: fmt.Sprintf("/nudm-sdm/v2/imsi-%d", i)})
		blocks = append(blocks, []byte(b.String()))
	}
	if d := decodeBoth(blocks); d != "" {
		t.Fatal(d)
	}
	var got fieldList
	dec := newHPACKDecoder(64 << 10)
	for _, blk := range blocks {
		got = got[:0]
		if err := dec.decode(blk, &got); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], ":path: /nudm-sdm/v2/imsi-199") {
		t.Fatalf("last block decoded to %q", got)
	}
}

// appendTestField appends a literal field without indexing, plain strings.
func appendTestField(b []byte, name, value string) []byte {
	b = append(b, 0x00)
	b = appendTestInt(b, 7, len(name))
	b = append(b, name...)
	b = appendTestInt(b, 7, len(value))
	return append(b, value...)
}

func appendTestInt(b []byte, n uint, v int) []byte {
	limit := 1<<n - 1
	if v < limit {
		return append(b, byte(v))
	}
	b = append(b, byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
