package probe

import (
	"errors"
	"strings"
	"unsafe"

	"golang.org/x/net/http2/hpack"
)

// hpackDecoder decodes HPACK header blocks (RFC 7541) in place, handing each
// field to flow.field as slices of the block (or of a scratch buffer, for
// Huffman-coded strings) without making strings. x/net's Decoder made a
// string of every name and value, a copy's 2.5 KB padding header among them,
// which made it most of a probe's CPU. It is the whole of RFC 7541's decoding — static
// and dynamic tables, size updates, Huffman strings — and FuzzHPACK holds it
// to x/net's Decoder: the same blocks accepted, the same fields out.
type hpackDecoder struct {
	dyn     []hpackEntry // the dynamic table, oldest first
	dynSize int          // RFC 7541 §4.1 size of the entries
	maxSize int          // the table's size limit, as the last update set it
	allowed int          // the most an update may set
	huff    appendWriter // Huffman-decoded strings of the current block
	pending []byte       // a block's fragments until its last frame
}

type hpackEntry struct{ name, value string }

func (e hpackEntry) size() int { return len(e.name) + len(e.value) + 32 }

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// newHPACKDecoder returns a decoder whose table may grow to max bytes; like
// x/net's, it starts at that size.
func newHPACKDecoder(max int) *hpackDecoder {
	return &hpackDecoder{maxSize: max, allowed: max}
}

// reset empties the dynamic table: the flow starts afresh.
func (d *hpackDecoder) reset() {
	clear(d.dyn)
	d.dyn, d.dynSize, d.maxSize = d.dyn[:0], 0, d.allowed
	d.pending = d.pending[:0]
}

var (
	errHPACKTruncated = errors.New("hpack: truncated header block")
	errHPACKIndex     = errors.New("hpack: invalid header index")
	errHPACKVarint    = errors.New("hpack: varint integer overflow")
	errHPACKSize      = errors.New("hpack: dynamic table size update too large")
	errHPACKSizeLate  = errors.New("hpack: dynamic table size update MUST occur at the beginning of a header block")
)

// fragment takes one frame's part of a header block; at the block's end it
// decodes the block into f.
func (d *hpackDecoder) fragment(frag []byte, end bool, f fieldSink) error {
	if !end {
		d.pending = append(d.pending, frag...)
		return nil
	}
	block := frag
	if len(d.pending) > 0 {
		d.pending = append(d.pending, frag...)
		block = d.pending
	}
	err := d.decode(block, f)
	d.pending = d.pending[:0]
	return err
}

// fieldSink takes the fields of a header block; name and value may alias a
// buffer that is reused once field returns.
type fieldSink interface{ field(name, value string) }

// decode decodes one whole header block. Like x/net's Decoder, it accepts a
// size update after the block's first representation only while the table
// is empty.
func (d *hpackDecoder) decode(b []byte, f fieldSink) error {
	d.huff.b = d.huff.b[:0]
	first := true
	for len(b) > 0 {
		c := b[0]
		switch {
		case c&0x80 != 0: // indexed field, §6.1
			i, rest, err := hpackInt(b, 7)
			if err != nil {
				return err
			}
			e, ok := d.at(i)
			if !ok {
				return errHPACKIndex
			}
			f.field(e.name, e.value)
			b = rest
		case c&0xe0 == 0x20: // dynamic table size update, §6.3
			if !first && d.dynSize > 0 {
				return errHPACKSizeLate
			}
			n, rest, err := hpackInt(b, 5)
			if err != nil {
				return err
			}
			if n > uint64(d.allowed) {
				return errHPACKSize
			}
			d.maxSize = int(n)
			d.evict(0)
			b = rest
		default: // literal field, §6.2: with indexing (01), without (0000), never indexed (0001)
			index := c&0xc0 == 0x40
			prefix := uint(4)
			if index {
				prefix = 6
			}
			i, rest, err := hpackInt(b, prefix)
			if err != nil {
				return err
			}
			var name, value []byte
			var nameStr string
			if i == 0 {
				if name, rest, err = d.str(rest); err != nil {
					return err
				}
			} else {
				e, ok := d.at(i)
				if !ok {
					return errHPACKIndex
				}
				nameStr = e.name
			}
			if value, rest, err = d.str(rest); err != nil {
				return err
			}
			if name != nil {
				nameStr = unsafeString(name)
			}
			f.field(nameStr, unsafeString(value))
			if index { // the table keeps strings of its own
				d.add(hpackEntry{strings.Clone(nameStr), string(value)})
			}
			b = rest
		}
		first = false
	}
	return nil
}

// at is the entry of index i (1-based): the static table, then the dynamic
// table newest first.
func (d *hpackDecoder) at(i uint64) (hpackEntry, bool) {
	if i == 0 {
		return hpackEntry{}, false
	}
	if i <= uint64(len(staticTable)) {
		return staticTable[i-1], true
	}
	j := i - uint64(len(staticTable))
	if j > uint64(len(d.dyn)) {
		return hpackEntry{}, false
	}
	return d.dyn[uint64(len(d.dyn))-j], true
}

// add inserts e, evicting the oldest entries to make room (§4.4); an entry
// larger than the table empties it and is not added.
func (d *hpackDecoder) add(e hpackEntry) {
	if e.size() > d.maxSize {
		d.evict(d.maxSize + 1)
		return
	}
	d.evict(e.size())
	d.dyn = append(d.dyn, e)
	d.dynSize += e.size()
}

// evict drops the oldest entries until room more bytes fit.
func (d *hpackDecoder) evict(room int) {
	n := 0
	for n < len(d.dyn) && d.dynSize+room > d.maxSize {
		d.dynSize -= d.dyn[n].size()
		n++
	}
	if n > 0 {
		clear(d.dyn[:n])
		d.dyn = append(d.dyn[:0], d.dyn[n:]...)
	}
}

// str reads a string literal (§5.2): its bytes in the block, or in d.huff
// when Huffman-coded.
func (d *hpackDecoder) str(b []byte) ([]byte, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errHPACKTruncated
	}
	huffman := b[0]&0x80 != 0
	n, rest, err := hpackInt(b, 7)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(rest)) {
		return nil, nil, errHPACKTruncated
	}
	s, rest := rest[:n:n], rest[n:]
	if !huffman {
		return s, rest, nil
	}
	start := len(d.huff.b)
	if _, err := hpack.HuffmanDecode(&d.huff, s); err != nil {
		return nil, nil, err
	}
	return d.huff.b[start:len(d.huff.b):len(d.huff.b)], rest, nil
}

// unsafeString is b as a string without a copy, for a callee that keeps
// nothing of it (flow.field copies what it keeps).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// hpackInt reads an integer with an n-bit prefix (§5.1).
func hpackInt(b []byte, n uint) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errHPACKTruncated
	}
	limit := uint64(1)<<n - 1
	v := uint64(b[0]) & limit
	if v < limit {
		return v, b[1:], nil
	}
	b = b[1:]
	var m uint
	for len(b) > 0 {
		c := b[0]
		b = b[1:]
		v += uint64(c&0x7f) << m
		if c&0x80 == 0 {
			return v, b, nil
		}
		m += 7
		if m >= 63 {
			return 0, nil, errHPACKVarint
		}
	}
	return 0, nil, errHPACKTruncated
}

// staticTable is RFC 7541 Appendix A.
var staticTable = [...]hpackEntry{
	{":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"}, {":path", "/index.html"},
	{":scheme", "http"}, {":scheme", "https"}, {":status", "200"}, {":status", "204"}, {":status", "206"},
	{":status", "304"}, {":status", "400"}, {":status", "404"}, {":status", "500"}, {"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"}, {"accept-language", ""}, {"accept-ranges", ""}, {"accept", ""},
	{"access-control-allow-origin", ""}, {"age", ""}, {"allow", ""}, {"authorization", ""}, {"cache-control", ""},
	{"content-disposition", ""}, {"content-encoding", ""}, {"content-language", ""}, {"content-length", ""},
	{"content-location", ""}, {"content-range", ""}, {"content-type", ""}, {"cookie", ""}, {"date", ""},
	{"etag", ""}, {"expect", ""}, {"expires", ""}, {"from", ""}, {"host", ""}, {"if-match", ""},
	{"if-modified-since", ""}, {"if-none-match", ""}, {"if-range", ""}, {"if-unmodified-since", ""},
	{"last-modified", ""}, {"link", ""}, {"location", ""}, {"max-forwards", ""}, {"proxy-authenticate", ""},
	{"proxy-authorization", ""}, {"range", ""}, {"referer", ""}, {"refresh", ""}, {"retry-after", ""},
	{"server", ""}, {"set-cookie", ""}, {"strict-transport-security", ""}, {"transfer-encoding", ""},
	{"user-agent", ""}, {"vary", ""}, {"via", ""}, {"www-authenticate", ""},
}
