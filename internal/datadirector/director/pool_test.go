package director

import (
	"testing"
	"unsafe"

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

// TestRecordPool: a slice holds what was asked, comes back zeroed from the
// class it fully covers, and a class keeps a bounded number.
func TestRecordPool(t *testing.T) {
	p := newRecordPool()
	for _, n := range []int{0, 1, 8, 9, 100, 1 << 15, 1<<15 + 1} {
		if rs := p.GetRecords(n); cap(rs) < n || len(rs) != 0 {
			t.Errorf("GetRecords(%d): len %d cap %d", n, len(rs), cap(rs))
		}
	}
	rs := p.GetRecords(100)[:100] // class 4: 128 records
	rs[99] = kgo.Record{Value: []byte("x"), Offset: 7}
	p.PutRecords(rs)
	got := p.GetRecords(65)
	if cap(got) != 128 || &got[:1][0] != &rs[0] {
		t.Fatalf("GetRecords(65) after a put of 128: cap %d, not the same slice", cap(got))
	}
	if r := got[:100][99]; r.Value != nil || r.Offset != 0 {
		t.Fatalf("pooled record not zeroed: %+v", r)
	}
	for range 500 {
		p.PutRecords(make([]kgo.Record, 0, 128))
	}
	want := max(2, recordClassBytes/(int(unsafe.Sizeof(kgo.Record{}))*128))
	if n := len(p.classes[4]); n != want {
		t.Fatalf("class 4 keeps %d slices, want %d", n, want)
	}
}
