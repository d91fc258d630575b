package director

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDecompressPool(t *testing.T) {
	p := newDecompressPool()
	// A snappy block announcing 40,000 decoded bytes gets a 64 KiB buffer.
	b := p.GetDecompressBytes([]byte{0xc0, 0xb8, 0x02, 0, 0}, kgo.CodecSnappy)
	if len(b) != 0 || cap(b) != 64<<10 {
		t.Fatalf("snappy 40000: len %d cap %d, want 0, 65536", len(b), cap(b))
	}
	// xerial framing and other codecs: four times the compressed size.
	if b := p.GetDecompressBytes(append([]byte(xerialPrefix), make([]byte, 2000)...), kgo.CodecSnappy); cap(b) != 8<<10 {
		t.Errorf("xerial 2008 B: cap %d, want 8192", cap(b))
	}
	if b := p.GetDecompressBytes(make([]byte, 100), kgo.CodecLz4); cap(b) != 4<<10 {
		t.Errorf("lz4 100 B: cap %d, want 4096", cap(b))
	}
	// A buffer put back serves a request its capacity covers.
	p.PutDecompressBytes(make([]byte, 10, 100<<10)) // 100 KiB: class 64 KiB
	for range 10 {
		got := p.GetDecompressBytes([]byte{0xc0, 0xb8, 0x02}, kgo.CodecSnappy)
		if cap(got) < 40000 || len(got) != 0 {
			t.Fatalf("reused buffer: len %d cap %d", len(got), cap(got))
		}
	}
	// Larger than the largest class: a plain allocation, never pooled.
	if b := p.GetDecompressBytes(make([]byte, 4<<20), kgo.CodecGzip); cap(b) != 16<<20 {
		t.Errorf("gzip 4 MiB: cap %d, want 16 MiB", cap(b))
	}
	p.PutDecompressBytes(make([]byte, 0, 100)) // too small: dropped, no panic
}

func TestPoolClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 0}, {4096, 0}, {4097, 1}, {8192, 1}, {8193, 2}, {8 << 20, 11}, {8<<20 + 1, 12}} {
		if got := poolClass(c.n); got != c.want {
			t.Errorf("poolClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestDecompressPoolBounded checks that a class keeps at most
// poolClassBytes of free buffers.
func TestDecompressPoolBounded(t *testing.T) {
	p := newDecompressPool()
	for range 200 {
		p.PutDecompressBytes(make([]byte, 0, 64<<10)) // class 4: 64 KiB
	}
	if n, want := len(p.classes[4]), poolClassBytes/(64<<10); n != want {
		t.Fatalf("class 4 keeps %d buffers, want %d", n, want)
	}
	for range 5 {
		p.PutDecompressBytes(make([]byte, 0, 8<<20))
	}
	if n := len(p.classes[11]); n != 2 {
		t.Fatalf("class 11 keeps %d buffers, want 2", n)
	}
}
