package director

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// classPool keeps free slices of E by power-of-two capacity, from
// 1<<minShift elements up, in len(classes) classes; each class keeps at most
// maxBytes of free slices (at least two) and leaves the rest to the GC: a
// sync.Pool kept whatever lagging feeds had in flight (-feeds 4 at 30K:
// serve 1,008 MiB peak RSS).
type classPool[E any] struct {
	minShift int
	classes  []chan []E
	zero     bool // clear a slice's whole capacity when it is put back
}

func newClassPool[E any](minShift, classes, maxBytes int, zero bool) classPool[E] {
	p := classPool[E]{minShift: minShift, classes: make([]chan []E, classes), zero: zero}
	var e E
	size := max(1, int(unsafe.Sizeof(e)))
	for c := range p.classes {
		p.classes[c] = make(chan []E, max(2, maxBytes/(size<<(c+minShift))))
	}
	return p
}

// class is the class whose slices hold n elements: ceil(log2(n)) - minShift.
func (p classPool[E]) class(n int) int {
	if n <= 1<<p.minShift {
		return 0
	}
	return bits.Len(uint(n-1)) - p.minShift
}

// get returns an empty slice of capacity at least n.
func (p classPool[E]) get(n int) []E {
	c := p.class(n)
	if c >= len(p.classes) {
		return make([]E, 0, n)
	}
	select {
	case b := <-p.classes[c]:
		return b
	default:
		return make([]E, 0, 1<<(c+p.minShift))
	}
}

// put keeps b in the largest class it fully covers.
func (p classPool[E]) put(b []E) {
	n := cap(b)
	if n < 1<<p.minShift {
		return
	}
	c := bits.Len(uint(n)) - 1 - p.minShift // floor(log2(n)) - min
	if c >= len(p.classes) {
		return
	}
	if p.zero {
		clear(b[:n])
	}
	select {
	case p.classes[c] <- b[:0]:
	default: // the class has enough spare slices
	}
}

// decompressPool is a feed client's kgo.PoolDecompressBytes: the buffers
// fetched batches are decompressed into, by power-of-two capacity from 4 KiB
// to 8 MiB, at most poolClassBytes of free ones per class. A buffer comes
// back once every record of its batch is recycled (decodedPoll.unref); kgo
// zeroes it first.
type decompressPool struct{ classPool[byte] }

const (
	poolMinShift   = 12      // 4 KiB
	poolClasses    = 12      // up to 8 MiB; larger buffers are left to the GC
	poolClassBytes = 4 << 20 // free buffers kept per class
)

func newDecompressPool() decompressPool {
	return decompressPool{newClassPool[byte](poolMinShift, poolClasses, poolClassBytes, false)}
}

// xerialPrefix starts snappy data in the xerial framing (Java clients), which
// has no up-front decoded length.
const xerialPrefix = "\x82SNAPPY\x00"

// GetDecompressBytes returns a buffer of at least the decoded size when the
// codec says it up front (a snappy block starts with it), else of four times
// the compressed size (kgo grows it when that is short).
func (p decompressPool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	want := 4 * len(compressed)
	if codec == kgo.CodecSnappy && !bytes.HasPrefix(compressed, []byte(xerialPrefix)) {
		if n, k := binary.Uvarint(compressed); k > 0 && n < 1<<31 {
			want = int(n)
		}
	}
	return p.get(want)
}

// PutDecompressBytes keeps b in the largest class it fully covers.
func (p decompressPool) PutDecompressBytes(b []byte) { p.put(b) }

// poolClass is the decompressed-bytes class whose buffers hold n bytes.
func poolClass(n int) int { return classPool[byte]{minShift: poolMinShift}.class(n) }

// recordPool is a feed client's kgo.PoolRecords: the slices a fetched
// batch's records are decoded into (one per producer batch, otherwise
// garbage at the copy rate), by power-of-two length from 8 to 32,768
// records, at most recordClassBytes of free ones per class. Like the
// decompressed bytes, a slice comes back once every record of its batch is
// recycled (decodedPoll.unref), zeroed: its records point into the batch's
// decompressed bytes, which go back to their own pool.
type recordPool struct{ classPool[kgo.Record] }

const (
	recordMinShift   = 3 // 8 records
	recordClasses    = 13
	recordClassBytes = 1 << 20
)

func newRecordPool() recordPool {
	return recordPool{newClassPool[kgo.Record](recordMinShift, recordClasses, recordClassBytes, true)}
}

// GetRecords returns a slice of capacity at least n.
func (p recordPool) GetRecords(n int) []kgo.Record { return p.get(n) }

// PutRecords keeps rs in the largest class it fully covers.
func (p recordPool) PutRecords(rs []kgo.Record) { p.put(rs) }
