package director

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// decompressPool is a feed client's kgo.PoolDecompressBytes: the buffers
// fetched batches are decompressed into, by power-of-two capacity from 4 KiB
// to 8 MiB. A buffer comes back once every record of its batch is recycled
// (pollBatch.release); kgo zeroes it first. Each class keeps at most
// poolClassBytes of free buffers (at least two) and leaves the rest to the
// GC: a sync.Pool kept whatever lagging feeds had in flight (-feeds 4 at
// 30K: serve 1,008 MiB peak RSS).
type decompressPool struct {
	classes *[poolClasses]chan []byte
}

const (
	poolMinShift   = 12      // 4 KiB
	poolClasses    = 12      // up to 8 MiB; larger buffers are left to the GC
	poolClassBytes = 4 << 20 // free buffers kept per class
)

func newDecompressPool() decompressPool {
	p := decompressPool{classes: new([poolClasses]chan []byte)}
	for c := range p.classes {
		p.classes[c] = make(chan []byte, max(2, poolClassBytes>>(c+poolMinShift)))
	}
	return p
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
	c := poolClass(want)
	if c >= poolClasses {
		return make([]byte, 0, want)
	}
	select {
	case b := <-p.classes[c]:
		return b
	default:
		return make([]byte, 0, 1<<(c+poolMinShift))
	}
}

// PutDecompressBytes keeps b in the largest class it fully covers.
func (p decompressPool) PutDecompressBytes(b []byte) {
	n := cap(b)
	if n < 1<<poolMinShift {
		return
	}
	c := bits.Len(uint(n)) - 1 - poolMinShift // floor(log2(n)) - min
	if c >= poolClasses {
		return
	}
	select {
	case p.classes[c] <- b[:0]:
	default: // the class has enough spare buffers
	}
}

// poolClass is the class whose buffers hold n bytes: ceil(log2(n)) - min.
func poolClass(n int) int {
	if n <= 1<<poolMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - poolMinShift
}

// recordPool is a feed client's kgo.PoolRecords: the slices a fetched
// batch's records are decoded into (one per producer batch: ~90 MB/s of
// garbage at 30K copies/s before), by power-of-two length from 8 to 32,768
// records. Like the decompressed bytes, a slice comes back once every record
// of its batch is recycled (pollBatch.release); each class keeps at most
// recordClassBytes of free slices (at least two).
type recordPool struct {
	classes *[recordClasses]chan []kgo.Record
}

const (
	recordMinShift   = 3 // 8 records
	recordClasses    = 13
	recordClassBytes = 1 << 20
)

func newRecordPool() recordPool {
	p := recordPool{classes: new([recordClasses]chan []kgo.Record)}
	size := int(unsafe.Sizeof(kgo.Record{}))
	for c := range p.classes {
		p.classes[c] = make(chan []kgo.Record, max(2, recordClassBytes/(size<<(c+recordMinShift))))
	}
	return p
}

// GetRecords returns a slice of capacity at least n.
func (p recordPool) GetRecords(n int) []kgo.Record {
	c := 0
	if n > 1<<recordMinShift {
		c = bits.Len(uint(n-1)) - recordMinShift
	}
	if c >= recordClasses {
		return make([]kgo.Record, 0, n)
	}
	select {
	case rs := <-p.classes[c]:
		return rs
	default:
		return make([]kgo.Record, 0, 1<<(c+recordMinShift))
	}
}

// PutRecords keeps rs, zeroed (its records point into the batch's
// decompressed bytes, which go back to their own pool), in the largest
// class it fully covers.
func (p recordPool) PutRecords(rs []kgo.Record) {
	n := cap(rs)
	if n < 1<<recordMinShift {
		return
	}
	c := bits.Len(uint(n)) - 1 - recordMinShift
	if c >= recordClasses {
		return
	}
	rs = rs[:n]
	clear(rs)
	select {
	case p.classes[c] <- rs[:0]:
	default:
	}
}
