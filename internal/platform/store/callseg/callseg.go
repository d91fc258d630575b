// Package callseg is the storage format of the CURRI call log: segments,
// one row per written batch, holding the batch's records in one compressed
// blob, the batch's time range, a bitmask of its decisions and a Bloom
// filter of its numbers. Writing a call
// then costs an append to a buffer, not a B-tree insert into a table and its
// indexes per call, which on the embedded SQLite cost more than answering
// the call. A search walks segments newest first, skips those whose
// time range, decisions or number filter rule them out, and decodes the rest.
//
// A record's ID is segmentID<<16 | index, so IDs grow with every write
// without a per-record sequence and survive a segment being trimmed by
// retention.
package callseg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Record is one logged CURRI decision.
type Record struct {
	ID                 int64     `json:"id"`
	Time               time.Time `json:"time"`
	Policy             string    `json:"policy"`
	Calling            string    `json:"calling"`
	Called             string    `json:"called"`
	TransformedCalling string    `json:"transformed_calling"`
	TransformedCalled  string    `json:"transformed_called"`
	TriggerPoint       string    `json:"trigger_point"`
	DeviceName         string    `json:"device_name"`
	Decision           string    `json:"decision"` // permit | deny | divert | indeterminate
	Step               string    `json:"step"`
	RuleID             int64     `json:"rule_id,omitempty"`
	EntryID            int64     `json:"entry_id,omitempty"`
	LatencyMicros      int64     `json:"latency_us"`
	Client             string    `json:"client"`
	// Form is the number form a list entry or rate limit matched on
	// (callpolicy.Decision.Form).
	Form string `json:"matched_form,omitempty"`
	// Sent is what CUCM was told, in short: "continue", "divert 12378
	// reason=chaperone", "reject announce=user_unavailable"; empty when
	// the answer was Indeterminate.
	Sent string `json:"sent,omitempty"`
	// Error is why the answer was Indeterminate.
	Error string `json:"error,omitempty"`
}

// strs lists a record's string fields in their stored order: Encode, Fit
// and Decode all walk this one list.
// Version 1 segments hold the first ten.
func (c *Record) strs() [numStrs]*string {
	return [numStrs]*string{&c.Policy, &c.Calling, &c.Called, &c.TransformedCalling, &c.TransformedCalled,
		&c.TriggerPoint, &c.DeviceName, &c.Decision, &c.Step, &c.Client, &c.Form, &c.Sent, &c.Error}
}

// numStrs is how many strings a record stores; version 1 stored v1Strs.
const numStrs, v1Strs = 13, 10

const (
	// IDShift: a record's ID is its segment's ID shifted left by this, or'd
	// with its index in the segment.
	IDShift = 16
	// MaxRecords is the most records a segment holds (the index is 16 bits).
	MaxRecords   = 1 << IDShift
	segVersion   = 2 // 1: without Form, Sent and Error
	segFlagZstd  = 1
	bloomBitsPer = 10 // bits per distinct number: ~1 % false positives with 7 hashes
	bloomHashes  = 7
	// MaxSegmentBytes bounds a segment's encoded records (Fit); a decoded
	// segment larger than maxSegDataSize is refused as corrupt.
	MaxSegmentBytes = 16 << 20
	maxSegDataSize  = 64 << 20
)

// DecisionBit is a decision's bit in Segment.Decisions.
func DecisionBit(d string) int64 {
	switch d {
	case "permit":
		return 1
	case "deny":
		return 2
	case "divert":
		return 4
	case "indeterminate":
		return 8
	}
	return 16 // anything else: a search for it must decode
}

// Segment is one encoded batch.
type Segment struct {
	MinTime, MaxTime int64 // unix µs
	Count            int
	Decisions        int64
	Filter           []byte
	Data             []byte
}

var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxSegDataSize))
		if err != nil {
			panic(err)
		}
		return d
	})
	segBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}
)

// Encode encodes records (at most MaxRecords); idx gives each
// record's index (nil: 0..n-1 in order).
func Encode(recs []Record, idx []int) Segment {
	seg := Segment{Count: len(recs), MinTime: math.MaxInt64, MaxTime: math.MinInt64}
	bp := segBufPool.Get().(*[]byte)
	b := (*bp)[:0]
	b = binary.AppendUvarint(b, uint64(len(recs)))
	prevT, prevIdx := int64(0), -1
	f := newBloom(4 * len(recs))
	for i := range recs {
		c := &recs[i]
		ix := i
		if idx != nil {
			ix = idx[i]
		}
		t := c.Time.UnixMicro()
		seg.MinTime, seg.MaxTime = min(seg.MinTime, t), max(seg.MaxTime, t)
		seg.Decisions |= DecisionBit(c.Decision)
		b = binary.AppendUvarint(b, uint64(ix-prevIdx))
		b = binary.AppendVarint(b, t-prevT)
		prevT, prevIdx = t, ix
		for _, s := range c.strs() {
			b = binary.AppendUvarint(b, uint64(len(*s)))
			b = append(b, *s...)
		}
		b = binary.AppendVarint(b, c.RuleID)
		b = binary.AppendVarint(b, c.EntryID)
		b = binary.AppendVarint(b, c.LatencyMicros)
		f.add(c.Calling)
		f.add(c.Called)
		f.add(c.TransformedCalling)
		f.add(c.TransformedCalled)
	}
	if len(recs) == 0 {
		seg.MinTime, seg.MaxTime = 0, 0
	}
	out := make([]byte, 2, 2+len(b)/3)
	out[0], out[1] = segVersion, segFlagZstd
	seg.Data = zenc().EncodeAll(b, out)
	seg.Filter = f.Bits
	*bp = b
	segBufPool.Put(bp)
	return seg
}

// Fit returns how many of recs (at least one) go into one segment: at most
// MaxRecords, and no more than MaxSegmentBytes of encoded records, so every
// segment written can be read back (Decode refuses more than
// maxSegDataSize).
func Fit(recs []Record) int {
	size := 0
	for i := range recs {
		size += 40
		for _, s := range recs[i].strs() {
			size += len(*s)
		}
		if i == MaxRecords || (i > 0 && size > MaxSegmentBytes) {
			return i
		}
	}
	return len(recs)
}

// ErrCorrupt marks a segment that does not decode.
var ErrCorrupt = errors.New("corrupt call log segment")

// Decode calls fn for every record of a segment (in stored order)
// with its record ID. The record is fn's to keep. fn returning false stops.
func Decode(segID int64, data []byte, fn func(id int64, c Record) bool) error {
	if len(data) < 2 || data[0] != segVersion && data[0] != 1 {
		return fmt.Errorf("segment %d: %w: unknown format", segID, ErrCorrupt)
	}
	nStrs := numStrs
	if data[0] == 1 {
		nStrs = v1Strs
	}
	body := data[2:]
	if data[1]&segFlagZstd != 0 {
		bp := segBufPool.Get().(*[]byte)
		defer segBufPool.Put(bp)
		var err error
		body, err = zdec().DecodeAll(body, (*bp)[:0])
		if err != nil {
			return fmt.Errorf("segment %d: %w: %v", segID, ErrCorrupt, err)
		}
		*bp = body
	}
	d := segDecoder{b: body}
	n := d.uvarint()
	if n > MaxRecords {
		return fmt.Errorf("segment %d: %w: %d records", segID, ErrCorrupt, n)
	}
	prevT, prevIdx := int64(0), int64(-1)
	for range n {
		var c Record
		prevIdx += int64(d.uvarint())
		prevT += d.varint()
		strs := c.strs()
		for _, s := range strs[:nStrs] {
			*s = d.str()
		}
		c.RuleID, c.EntryID, c.LatencyMicros = d.varint(), d.varint(), d.varint()
		if d.err || prevIdx < 0 || prevIdx >= MaxRecords {
			return fmt.Errorf("segment %d: %w: truncated or malformed record", segID, ErrCorrupt)
		}
		c.Time = time.UnixMicro(prevT).UTC()
		c.ID = segID<<IDShift | prevIdx
		if !fn(c.ID, c) {
			return nil
		}
	}
	if len(d.b) != 0 {
		return fmt.Errorf("segment %d: %w: %d trailing bytes", segID, ErrCorrupt, len(d.b))
	}
	return nil
}

// segDecoder reads varints and strings, remembering the first error.
type segDecoder struct {
	b   []byte
	err bool
}

func (d *segDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *segDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *segDecoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err, d.b = true, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Trim re-encodes a segment keeping only the records keep accepts,
// with their IDs. It returns the new segment and how many were dropped.
func Trim(segID int64, data []byte, keep func(c *Record) bool) (Segment, int, error) {
	var recs []Record
	var idx []int
	dropped := 0
	err := Decode(segID, data, func(id int64, c Record) bool {
		if keep(&c) {
			recs = append(recs, c)
			idx = append(idx, int(id&(MaxRecords-1)))
		} else {
			dropped++
		}
		return true
	})
	if err != nil {
		return Segment{}, 0, err
	}
	// Decoded in stored order, so the indexes stay ascending as Encode
	// needs them.
	return Encode(recs, idx), dropped, nil
}

// Bloom is a Bloom filter over number strings, laid out as little-endian
// 64-bit words so it reads the same on every machine and in every backend.
type Bloom struct{ Bits []byte }

func newBloom(n int) Bloom {
	words := max(1, (n*bloomBitsPer+63)/64)
	return Bloom{Bits: make([]byte, 8*words)}
}

// fnv64a hashes without allocating (hash/fnv would need a []byte copy).
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// probe returns the filter's bit positions for s: double hashing of one
// 64-bit FNV-1a hash.
func (f Bloom) probe(s string) (pos [bloomHashes]uint64) {
	h := fnv64a(s)
	h1, h2, m := h&0xffffffff, h>>32|1, uint64(len(f.Bits))*8
	for i := range pos {
		pos[i] = (h1 + uint64(i)*h2) % m
	}
	return pos
}

func (f Bloom) add(s string) {
	if s == "" {
		return
	}
	for _, bit := range f.probe(s) {
		f.Bits[bit/8] |= 1 << (bit % 8)
	}
}

// MayContain is false only if s was never added. An empty or malformed
// filter answers true: it cannot rule anything out.
func (f Bloom) MayContain(s string) bool {
	if len(f.Bits) == 0 || len(f.Bits)%8 != 0 {
		return true
	}
	for _, bit := range f.probe(s) {
		if f.Bits[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// Newer orders records newest first: by time, then by ID.
func Newer(a, b *Record) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	return a.ID > b.ID
}
