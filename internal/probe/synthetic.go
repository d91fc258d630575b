package probe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/http2"
)

// The synthetic stream (written by internal/sink/synthetic): per TCP
// connection a libpcap global header, then one record per packet. Each
// packet is Ethernet / IPv4|IPv6 / TCP; its payload is either the HTTP/2
// connection preface and/or SETTINGS (control), or whole HTTP/2 frames of one
// copy: HEADERS (+CONTINUATION), then DATA with END_STREAM on the last. A
// frame never continues into the next record, so a copy is limited to what
// one packet holds: about 64 KiB, as the IPv4 total length is 16 bits
// (maxRecordLen bounds the record itself). Bigger copies are not supported
// and show up as invalid (truncated_frame).
const (
	magicMicros   = 0xa1b2c3d4
	magicNanos    = 0xa1b23c4d
	linkEthernet  = 1
	maxRecordLen  = 256 << 10
	clientPreface = http2.ClientPreface
)

// flowKey identifies a synthetic TCP flow (addresses and ports, one way).
type flowKey struct {
	src, dst [16]byte
	sp, dp   uint16
}

// flow is the HTTP/2 decoding state of one synthetic flow.
type flow struct {
	dec    *hpackDecoder
	fields copyFields
	seq    []byte // the current copy's x-signalbox-seq
}

// copyFields are what the probe extracts from one copy's headers.
type copyFields struct {
	seq          string // aliases flow.seq
	path, status bool   // the copy has :path, :status
	stream       uint32
	data         int
	headersDone  bool
	endStream    bool // HEADERS had END_STREAM; the block ends in CONTINUATION
	err          error
}

func newFlow() *flow {
	f := &flow{}
	// Senders encode without a dynamic table, so any fresh decoder works; a
	// per-flow one also copes with senders that do index.
	f.freshDecoder()
	return f
}

// freshDecoder gives the flow an HPACK decoder with an empty dynamic table.
func (f *flow) freshDecoder() {
	f.dec = newHPACKDecoder(64 << 10) // tolerates table size updates up to 64 KiB
}

// field takes one header field of the copy; name and value may alias a
// buffer that is reused after it returns.
func (f *flow) field(name, value string) {
	switch name {
	case "x-signalbox-seq":
		f.seq = append(f.seq[:0], value...)
		f.fields.seq = unsafeString(f.seq)
	case ":path":
		f.fields.path = value != ""
	case ":status":
		f.fields.status = value != ""
	}
}

// connDecoder decodes one synthetic connection's pcap stream.
type connDecoder struct {
	s       *stats
	nanos   bool
	order   binary.ByteOrder
	snaplen uint32
	hdr     [16]byte
	buf     []byte
	save    *pcapSaver // nil unless -pcap
	slots   []flowSlot // the flow table, maxFlows slots

	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

// maxFlows bounds the flows a connection remembers. Every transaction may be
// its own synthetic flow (ports from the copy's metadata), so an unbounded
// table grows by an HPACK decoder per transaction: gigabytes within a
// minute at 30k copies/s.
const (
	flowBits = 12
	maxFlows = 1 << flowBits
)

// flowSlot is one entry of the flow table.
type flowSlot struct {
	key   flowKey
	f     *flow
	valid bool
}

// flow returns the state of key's flow. The table is direct-mapped: a new
// flow takes its slot from whichever flow held it (a map with a victim
// evicted per new flow probes past its deleted entries). The HPACK decoder is then fresh: a flow's dynamic table
// must not leak into another.
func (d *connDecoder) flow(key flowKey) *flow {
	if d.slots == nil {
		d.slots = make([]flowSlot, maxFlows)
	}
	s := &d.slots[key.hash()]
	if s.valid && s.key == key {
		return s.f
	}
	if s.f == nil {
		s.f = newFlow()
	} else {
		s.f.freshDecoder()
	}
	s.key, s.valid = key, true
	return s.f
}

// drop forgets key's flow, after a bad packet.
func (d *connDecoder) drop(key flowKey) {
	if s := &d.slots[key.hash()]; s.valid && s.key == key {
		s.valid = false
	}
}

// hash mixes the flow's addresses and ports into a flow table slot
// (Fibonacci hashing: the top log2(maxFlows) bits).
func (k *flowKey) hash() uint64 {
	le := binary.LittleEndian
	h := le.Uint64(k.src[:8]) ^ le.Uint64(k.src[8:])*0x9e3779b97f4a7c15
	h = (h ^ le.Uint64(k.dst[:8])) * 0xff51afd7ed558ccd
	h = (h ^ le.Uint64(k.dst[8:])) * 0xc4ceb9fe1a85ec53
	h = (h ^ uint64(k.sp)<<16 ^ uint64(k.dp)) * 0x9e3779b97f4a7c15
	return h >> (64 - flowBits)
}

func newConnDecoder(s *stats) *connDecoder {
	d := &connDecoder{s: s}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &d.eth, &d.ip4, &d.ip6, &d.tcp, &d.payload)
	d.parser.IgnoreUnsupported = true
	return d
}

// errStream is a fatal problem with the pcap framing itself: the connection
// cannot be resynchronised and is dropped.
type errStream struct{ reason, detail string }

func (e *errStream) Error() string { return e.reason + ": " + e.detail }

// readGlobal reads and checks the pcap global header.
func (d *connDecoder) readGlobal(r io.Reader) error {
	var g [24]byte
	if _, err := io.ReadFull(r, g[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return &errStream{"bad_pcap_header", "short global header"}
		}
		return err
	}
	switch {
	case binary.LittleEndian.Uint32(g[:]) == magicMicros:
		d.order = binary.LittleEndian
	case binary.LittleEndian.Uint32(g[:]) == magicNanos:
		d.order, d.nanos = binary.LittleEndian, true
	case binary.BigEndian.Uint32(g[:]) == magicMicros:
		d.order = binary.BigEndian
	case binary.BigEndian.Uint32(g[:]) == magicNanos:
		d.order, d.nanos = binary.BigEndian, true
	default:
		return &errStream{"bad_pcap_header", fmt.Sprintf("magic %#x", binary.LittleEndian.Uint32(g[:]))}
	}
	if lt := d.order.Uint32(g[20:]); lt&0xffff != linkEthernet {
		return &errStream{"bad_pcap_header", "linktype " + strconv.FormatUint(uint64(lt), 10) + ", want Ethernet (1)"}
	}
	d.snaplen = d.order.Uint32(g[16:])
	if d.save != nil {
		d.save.global(g[:])
	}
	return nil
}

// run decodes records until EOF or a framing error.
func (d *connDecoder) run(conn io.Reader) error {
	r := bufio.NewReaderSize(conn, 256<<10)
	if err := d.readGlobal(r); err != nil {
		return err
	}
	for {
		if _, err := io.ReadFull(r, d.hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return &errStream{"truncated_record", "short record header"}
			}
			return err
		}
		sec := int64(d.order.Uint32(d.hdr[0:]))
		frac := int64(d.order.Uint32(d.hdr[4:]))
		incl := d.order.Uint32(d.hdr[8:])
		if incl > maxRecordLen || (d.snaplen > 0 && incl > d.snaplen) {
			return &errStream{"bad_record_length", fmt.Sprintf("record of %d bytes (snaplen %d)", incl, d.snaplen)}
		}
		if cap(d.buf) < int(incl) {
			d.buf = make([]byte, incl, max(int(incl), 64<<10))
		}
		d.buf = d.buf[:incl]
		if _, err := io.ReadFull(r, d.buf); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err // the probe is shutting down; not the sender's fault
			}
			return &errStream{"truncated_record", err.Error()}
		}
		if d.save != nil {
			d.save.record(d.hdr[:], d.buf)
		}
		ts := sec * 1e9
		if d.nanos {
			ts += frac
		} else {
			ts += frac * 1e3
		}
		d.packet(d.buf, ts, time.Now())
	}
}

// packet decodes one record: L2-L4 with gopacket, then the HTTP/2 frames.
func (d *connDecoder) packet(data []byte, ts int64, now time.Time) {
	if err := d.parser.DecodeLayers(data, &d.decoded); err != nil {
		d.s.bad("bad_packet", err.Error())
		return
	}
	var key flowKey
	var haveIP, haveTCP bool
	for _, lt := range d.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			copy(key.src[:], d.ip4.SrcIP.To16())
			copy(key.dst[:], d.ip4.DstIP.To16())
			haveIP = true
		case layers.LayerTypeIPv6:
			copy(key.src[:], d.ip6.SrcIP)
			copy(key.dst[:], d.ip6.DstIP)
			haveIP = true
		case layers.LayerTypeTCP:
			key.sp, key.dp = uint16(d.tcp.SrcPort), uint16(d.tcp.DstPort)
			haveTCP = true
		}
	}
	if !haveIP || !haveTCP {
		d.s.bad("not_tcp", fmt.Sprintf("packet layers %v", d.decoded))
		return
	}
	payload := d.tcp.Payload
	if len(payload) == 0 {
		d.s.bad("empty_payload", "TCP packet without payload")
		return
	}
	f := d.flow(key)
	control := false
	if bytes.HasPrefix(payload, []byte(clientPreface)) {
		payload = payload[len(clientPreface):]
		control = true
	}
	// After a bad packet the flow's HTTP/2 state is suspect: start afresh.
	bad := func(reason, detail string) {
		d.s.bad(reason, detail)
		d.drop(key)
	}
	f.fields = copyFields{}
	sawCopy, inHeaders := false, false
	for len(payload) > 0 {
		fr, rest, err := nextFrame(payload)
		if err != nil {
			if errors.Is(err, errTruncatedFrame) {
				bad("truncated_frame", "HTTP/2 frame continues past the packet")
			} else {
				bad("bad_frame", err.Error())
			}
			return
		}
		payload = rest
		if inHeaders && fr.typ != http2.FrameContinuation {
			bad("bad_frame", "got "+fr.typ.String()+" frame while expecting CONTINUATION")
			return
		}
		switch fr.typ {
		case http2.FrameSettings, http2.FrameWindowUpdate, http2.FramePing:
			if sawCopy {
				bad("bad_frame", "control frame inside a copy")
				return
			}
			control = true
		case http2.FrameHeaders:
			if sawCopy {
				bad("bad_frame", "second HEADERS in one packet")
				return
			}
			sawCopy = true
			f.fields.stream = fr.stream
			end := fr.flags.Has(http2.FlagHeadersEndHeaders)
			inHeaders = !end
			if err := f.headerBlock(fr.data, end); err != nil {
				bad("bad_hpack", err.Error())
				return
			}
			if fr.flags.Has(http2.FlagHeadersEndStream) {
				if !end {
					// The stream ends with the header block, which
					// must end in this packet's CONTINUATION frames.
					f.fields.endStream = true
					continue
				}
				d.finish(f, len(data), ts, now)
				return
			}
		case http2.FrameContinuation:
			if !inHeaders || fr.stream != f.fields.stream {
				bad("bad_frame", "CONTINUATION without HEADERS on its stream")
				return
			}
			end := fr.flags.Has(http2.FlagContinuationEndHeaders)
			inHeaders = !end
			if err := f.headerBlock(fr.data, end); err != nil {
				bad("bad_hpack", err.Error())
				return
			}
			if end && f.fields.endStream {
				d.finish(f, len(data), ts, now)
				return
			}
		case http2.FrameData:
			if !sawCopy || !f.fields.headersDone || fr.stream != f.fields.stream {
				bad("bad_frame", "DATA without HEADERS on its stream")
				return
			}
			f.fields.data += len(fr.data)
			if fr.flags.Has(http2.FlagDataEndStream) {
				d.finish(f, len(data), ts, now)
				return
			}
		default:
			bad("bad_frame", "unexpected "+fr.typ.String()+" frame")
			return
		}
	}
	switch {
	case sawCopy:
		bad("incomplete_copy", "packet ends before END_STREAM")
	case control:
		d.s.count(&d.s.control)
	default:
		bad("bad_frame", "packet holds no HTTP/2 frame")
	}
}

func (f *flow) headerBlock(frag []byte, end bool) error {
	if end {
		f.fields.headersDone = true
	}
	return f.dec.fragment(frag, end, f)
}

func (d *connDecoder) finish(f *flow, size int, ts int64, now time.Time) {
	if !f.fields.path && !f.fields.status {
		d.s.bad("missing_pseudo_header", "copy has neither :path nor :status")
		return
	}
	d.s.copySeen(f.fields.seq, "", size, f.fields.data, ts, now)
}

// frame is one HTTP/2 frame of a packet: its header and its payload without
// padding or priority fields, aliasing the packet.
type frame struct {
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
	data   []byte
}

var errTruncatedFrame = errors.New("truncated frame")

// nextFrame splits the first HTTP/2 frame off p, checking what RFC 9113
// requires of the frame types a synthetic stream carries (§6): the stream
// each may be on, fixed lengths, and padding within the payload. It reads
// in place; x/net/http2's Framer copies every frame into its own buffer.
func nextFrame(p []byte) (frame, []byte, error) {
	if len(p) < 9 {
		return frame{}, nil, errTruncatedFrame
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	fr := frame{typ: http2.FrameType(p[3]), flags: http2.Flags(p[4]), stream: binary.BigEndian.Uint32(p[5:9]) & (1<<31 - 1)}
	if n > maxRecordLen {
		return frame{}, nil, fmt.Errorf("frame of %d bytes, larger than a record", n)
	}
	if len(p) < 9+n {
		return frame{}, nil, errTruncatedFrame
	}
	fr.data, p = p[9:9+n], p[9+n:]
	onStream := func() error {
		if fr.stream == 0 {
			return fmt.Errorf("%v frame on stream 0", fr.typ)
		}
		return nil
	}
	var err error
	switch fr.typ {
	case http2.FrameData:
		if err = onStream(); err == nil && fr.flags.Has(http2.FlagDataPadded) {
			fr.data, err = unpad(fr.data)
		}
	case http2.FrameHeaders:
		if err = onStream(); err != nil {
			break
		}
		if fr.flags.Has(http2.FlagHeadersPadded) {
			if fr.data, err = unpad(fr.data); err != nil {
				break
			}
		}
		if fr.flags.Has(http2.FlagHeadersPriority) {
			if len(fr.data) < 5 {
				err = errors.New("HEADERS frame too short for its priority")
				break
			}
			fr.data = fr.data[5:]
		}
	case http2.FrameContinuation:
		err = onStream()
	case http2.FrameSettings:
		switch {
		case fr.stream != 0:
			err = errors.New("SETTINGS frame on a stream")
		case fr.flags.Has(http2.FlagSettingsAck) && n > 0:
			err = errors.New("SETTINGS ack with a payload")
		case n%6 != 0:
			err = fmt.Errorf("SETTINGS frame of %d bytes, not a multiple of 6", n)
		default:
			// The first SETTINGS_INITIAL_WINDOW_SIZE rules, above 2^31-1
			// a FLOW_CONTROL_ERROR (§6.5.2).
			for b := fr.data; len(b) >= 6; b = b[6:] {
				if http2.SettingID(binary.BigEndian.Uint16(b)) == http2.SettingInitialWindowSize {
					if binary.BigEndian.Uint32(b[2:]) > 1<<31-1 {
						err = errors.New("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
					}
					break
				}
			}
		}
	case http2.FramePing:
		if fr.stream != 0 || n != 8 {
			err = fmt.Errorf("PING frame of %d bytes on stream %d", n, fr.stream)
		}
	case http2.FrameWindowUpdate:
		if n != 4 {
			err = fmt.Errorf("WINDOW_UPDATE frame of %d bytes", n)
		} else if binary.BigEndian.Uint32(fr.data)&(1<<31-1) == 0 {
			err = errors.New("WINDOW_UPDATE of 0")
		}
	}
	return fr, p, err
}

// unpad strips the pad length byte and the padding from a PADDED payload.
func unpad(b []byte) ([]byte, error) {
	if len(b) == 0 || int(b[0]) > len(b)-1 {
		return nil, errors.New("padding longer than the frame")
	}
	return b[1 : len(b)-int(b[0])], nil
}
