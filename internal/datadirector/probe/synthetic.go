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

// The synthetic stream (written by internal/datadirector/sink/synthetic): per TCP
// connection a libpcap global header, then one record per packet. Each
// packet is Ethernet / IPv4|IPv6 / TCP. A synthetic flow opens with SYN,
// SYN-ACK, ACK (or without them), then the HTTP/2 connection preface and
// SETTINGS (control), then each copy's HTTP/2 frames: HEADERS
// (+CONTINUATION), then DATA with END_STREAM on the last, in MSS-sized
// segments, so frames continue from one segment to the next; it closes with
// FIN. Bare ACKs carry nothing. The probe reassembles each direction of a
// flow in sequence order: a segment that does not continue where the last
// one ended is counted (tcp_out_of_order) and the flow resumes at the next
// segment that starts a frame.
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

// flow is the TCP and HTTP/2 decoding state of one direction of a
// synthetic flow.
type flow struct {
	dec    *hpackDecoder
	fields copyFields
	seq    []byte // the current copy's x-signalbox-seq

	next      uint32 // the sequence number the next segment must have
	synced    bool   // next is known
	lost      bool   // after a gap: skip segments until one starts a frame
	buf       []byte // the start of a frame the last segment did not finish
	inCopy    bool   // a copy's HEADERS has been read, its END_STREAM not yet
	inHeaders bool   // its header block continues in CONTINUATION frames
	copyBytes int    // record bytes of the current copy's segments so far
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
	flows   map[flowKey]*flow
	spare   []*flow // flows closed with FIN, for reuse

	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

// maxFlows bounds the flows a connection remembers: the sender closes the
// flows it stops tracking with FIN (the encoder's table, 16,384 by
// default), and past this bound the probe forgets one at random. Every
// transaction may be its own synthetic flow (ports from the copy's
// metadata), so an unbounded table would grow by a flow per transaction.
const maxFlows = 1 << 18

// flow returns the state of key's flow, making it if it is new.
func (d *connDecoder) flow(key flowKey) *flow {
	if f := d.flows[key]; f != nil {
		return f
	}
	if d.flows == nil {
		d.flows = make(map[flowKey]*flow)
	}
	if len(d.flows) >= maxFlows {
		for k, f := range d.flows {
			delete(d.flows, k)
			d.spare = append(d.spare, f)
			break
		}
	}
	var f *flow
	if n := len(d.spare); n > 0 {
		f, d.spare = d.spare[n-1], d.spare[:n-1]
		f.restart()
	} else {
		f = newFlow()
	}
	d.flows[key] = f
	return f
}

// restart forgets a flow's state: a new connection on its addresses.
func (f *flow) restart() {
	f.freshDecoder()
	f.fields, f.seq = copyFields{}, f.seq[:0]
	f.next, f.synced, f.lost = 0, false, false
	f.buf, f.inCopy, f.inHeaders, f.copyBytes = f.buf[:0], false, false, 0
}

// drop forgets key's flow (it closed), keeping its buffers for another.
func (d *connDecoder) drop(key flowKey) {
	if f := d.flows[key]; f != nil {
		delete(d.flows, key)
		if len(d.spare) < 1024 {
			d.spare = append(d.spare, f)
		}
	}
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
				d.endOfStream()
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
	f := d.flow(key)
	tcp := &d.tcp
	if tcp.SYN {
		f.restart()
		f.next, f.synced = tcp.Seq+1, true
		d.s.count(&d.s.control)
		return
	}
	payload := tcp.Payload
	if len(payload) == 0 {
		if tcp.FIN {
			d.drop(key)
		}
		d.s.count(&d.s.control) // a bare ACK, or the closing FIN
		return
	}
	if f.synced && tcp.Seq != f.next {
		d.s.bad("tcp_out_of_order", fmt.Sprintf("segment at %d, the flow's next is %d", tcp.Seq, f.next))
		f.resync()
	}
	f.next, f.synced = tcp.Seq+uint32(len(payload)), true
	if tcp.FIN {
		defer d.drop(key)
	}
	if key.sp == diameterPort || key.dp == diameterPort {
		if f.lost && len(payload) >= diameterHeader && payload[0] == 1 {
			f.lost, f.buf = false, f.buf[:0] // a segment that starts a message
		}
		if !f.lost {
			d.diameter(f, payload, len(data), ts, now)
		}
		return
	}
	if f.lost {
		if !startsFrame(payload) {
			return // still inside what was lost
		}
		f.lost = false
	}
	if len(f.buf) == 0 && !f.inCopy && bytes.HasPrefix(payload, []byte(clientPreface)) {
		payload = payload[len(clientPreface):]
		f.restart()
		f.next, f.synced = tcp.Seq+uint32(len(clientPreface)+len(payload)), true
		if len(payload) == 0 {
			d.s.count(&d.s.control)
			return
		}
	}
	if f.inCopy {
		f.copyBytes += len(data)
	}
	// The bytes to frame: a frame the last segment left unfinished, then
	// this segment's.
	in := payload
	if len(f.buf) > 0 {
		f.buf = append(f.buf, payload...)
		in = f.buf
	}
	control := false
	for len(in) > 0 {
		fr, rest, err := nextFrame(in)
		if errors.Is(err, errTruncatedFrame) {
			if len(in) > maxFrameBuf {
				d.s.bad("bad_frame", fmt.Sprintf("frame of more than %d bytes", maxFrameBuf))
				f.resync()
				return
			}
			f.buf = append(f.buf[:0], in...) // in may be f.buf: append copies forward
			return
		}
		if err != nil {
			d.s.bad("bad_frame", err.Error())
			f.resync()
			return
		}
		in = rest
		if f.inHeaders && fr.typ != http2.FrameContinuation {
			d.s.bad("bad_frame", "got "+fr.typ.String()+" frame while expecting CONTINUATION")
			f.resync()
			return
		}
		switch fr.typ {
		case http2.FrameSettings, http2.FrameWindowUpdate, http2.FramePing:
			if f.inCopy {
				d.s.bad("bad_frame", "control frame inside a copy")
				f.resync()
				return
			}
			control = true
		case http2.FrameHeaders:
			if f.inCopy {
				d.s.bad("bad_frame", "HEADERS before the last copy's END_STREAM")
				f.resync()
				return
			}
			f.inCopy, f.copyBytes = true, len(data)
			f.fields = copyFields{stream: fr.stream}
			end := fr.flags.Has(http2.FlagHeadersEndHeaders)
			f.inHeaders = !end
			if err := f.headerBlock(fr.data, end); err != nil {
				d.s.bad("bad_hpack", err.Error())
				f.resync()
				return
			}
			if fr.flags.Has(http2.FlagHeadersEndStream) {
				if !end {
					// The stream ends with the header block, which
					// ends in CONTINUATION frames.
					f.fields.endStream = true
					continue
				}
				d.finish(f, ts, now)
			}
		case http2.FrameContinuation:
			if !f.inHeaders || fr.stream != f.fields.stream {
				d.s.bad("bad_frame", "CONTINUATION without HEADERS on its stream")
				f.resync()
				return
			}
			end := fr.flags.Has(http2.FlagContinuationEndHeaders)
			f.inHeaders = !end
			if err := f.headerBlock(fr.data, end); err != nil {
				d.s.bad("bad_hpack", err.Error())
				f.resync()
				return
			}
			if end && f.fields.endStream {
				d.finish(f, ts, now)
			}
		case http2.FrameData:
			if !f.inCopy || !f.fields.headersDone || fr.stream != f.fields.stream {
				d.s.bad("bad_frame", "DATA without HEADERS on its stream")
				f.resync()
				return
			}
			f.fields.data += len(fr.data)
			if fr.flags.Has(http2.FlagDataEndStream) {
				d.finish(f, ts, now)
			}
		default:
			d.s.bad("bad_frame", "unexpected "+fr.typ.String()+" frame")
			f.resync()
			return
		}
	}
	f.buf = f.buf[:0]
	if control && !f.inCopy {
		d.s.count(&d.s.control)
	}
}

// endOfStream counts the copies the connection ended in the middle of.
func (d *connDecoder) endOfStream() {
	for k, f := range d.flows {
		if f.inCopy || len(f.buf) > 0 {
			d.s.bad("incomplete_copy", "the stream ended inside a copy")
		}
		d.drop(k)
	}
}

// maxFrameBuf bounds the unfinished frame a flow keeps between segments: a
// frame is at most 16 KiB (the SETTINGS_MAX_FRAME_SIZE the stream keeps).
const maxFrameBuf = 1 << 20

// startsFrame reports whether a segment plausibly begins an HTTP/2 frame of
// the kinds a copy starts with: after a loss, a flow resumes there.
func startsFrame(p []byte) bool {
	if bytes.HasPrefix(p, []byte(clientPreface)) {
		return true
	}
	if len(p) < 9 {
		return false
	}
	switch http2.FrameType(p[3]) {
	case http2.FrameHeaders:
		return binary.BigEndian.Uint32(p[5:9])&(1<<31-1) != 0
	case http2.FrameSettings, http2.FrameWindowUpdate:
		return binary.BigEndian.Uint32(p[5:9])&(1<<31-1) == 0
	}
	return false
}

// resync gives up on the flow's current copy and frame after a bad segment:
// the flow resumes at the next segment that starts a frame, with a fresh
// HPACK decoder.
func (f *flow) resync() {
	f.freshDecoder()
	f.buf, f.inCopy, f.inHeaders, f.copyBytes = f.buf[:0], false, false, 0
	f.lost = true
}

func (f *flow) headerBlock(frag []byte, end bool) error {
	if end {
		f.fields.headersDone = true
	}
	return f.dec.fragment(frag, end, f)
}

func (d *connDecoder) finish(f *flow, ts int64, now time.Time) {
	f.inCopy = false
	if !f.fields.path && !f.fields.status {
		d.s.bad("missing_pseudo_header", "copy has neither :path nor :status")
		return
	}
	d.s.copySeen(f.fields.seq, "", f.copyBytes, f.fields.data, ts, now)
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
