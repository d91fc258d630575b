// Package synthetic turns NF message copies into a libpcap-format stream of
// synthesized Ethernet/IP/TCP packets carrying HTTP/2 frames, so that probes,
// tshark and Wireshark decode the copies as if they had been captured on the
// wire. The stream goes to a TCP or TLS consumer (Sink) or to any io.Writer
// (Writer; an os.File gives a .pcap file that tools open directly).
//
// Stream layout: a pcap global header (magic 0xa1b23c4d: nanosecond
// timestamps, version 2.4, snaplen 262144, linktype Ethernet), then one record
// per copy. The first time the encoder sees a flow it also emits two set-up
// records: the client's connection preface + SETTINGS + WINDOW_UPDATE, and the
// server's SETTINGS + SETTINGS ACK + WINDOW_UPDATE, so every synthetic TCP flow
// decodes on its own. Header blocks are HPACK-encoded without the dynamic table
// (static-table indices and literals only), so any frame decodes alone even
// when a reader joins the stream midway.
package synthetic

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"

	"github.com/signalbox/signalbox/internal/nfcopy"
)

// pcap and HTTP/2 constants.
const (
	pcapMagicNanos   = 0xa1b23c4d
	pcapSnapLen      = 262144
	linkTypeEthernet = 1

	h2FrameHeaderLen = 9
	h2MaxFrameSize   = 16384 // the default SETTINGS_MAX_FRAME_SIZE; we never raise it
	h2Preface        = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameData         = 0x0
	frameHeaders      = 0x1
	frameSettings     = 0x4
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4

	// Largest TCP payload one IP packet holds: the IPv4 total length and
	// the IPv6 payload length are 16-bit fields.
	maxSegment4 = 65535 - 20 - 20
	maxSegment6 = 65535 - 20

	defaultMaxFlows = 16384
)

// Mapping gives the L3/L4 address of an NF, matched on its FQDN or its NF
// instance id, used when a copy carries no source/destination address.
type Mapping struct {
	NFFQDN       string
	NFInstanceID string
	Addr         netip.AddrPort
}

// EncoderOptions configures an Encoder.
type EncoderOptions struct {
	Mappings []Mapping
	// MaxFlows sizes the flow table (per-flow sequence numbers), rounded
	// up to a power of two; 0 means 16384. The table is direct-mapped: a
	// new flow takes its slot from the flow that held it, which restarts
	// with fresh set-up records if it has another copy.
	MaxFlows int
}

type flowKey struct{ client, server netip.AddrPort }

// flowSlot is one entry of the flow table.
type flowSlot struct {
	key  flowKey
	st   flowState
	used bool
}

type flowState struct {
	clientSeq, serverSeq uint32 // next sequence number in each direction
	nextStream           uint32 // for copies without stream id and correlation id
}

// Encoder builds pcap records from copies. It is not safe for concurrent use;
// all its scratch space is reused, so encoding a copy does not allocate once
// the buffers have grown.
type Encoder struct {
	byFQDN map[string]netip.AddrPort
	byID   map[string]netip.AddrPort
	flows  []flowSlot // a power of two of them
	shift  uint       // 64 - log2(len(flows)): a hash's top bits index flows

	hp      *hpack.Encoder
	hblock  appendWriter // header block scratch
	payload []byte       // HTTP/2 frames scratch

	key *shareKey // encoders of one key encode alike (their mappings)
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// NewEncoder returns an Encoder with an empty flow table.
func NewEncoder(opts EncoderOptions) *Encoder {
	e := &Encoder{
		byFQDN:  make(map[string]netip.AddrPort),
		byID:    make(map[string]netip.AddrPort),
		payload: make([]byte, 0, 4096),
	}
	n := opts.MaxFlows
	if n <= 0 {
		n = defaultMaxFlows
	}
	e.shift = 64 - uint(bits.Len(uint(n-1)))
	e.flows = make([]flowSlot, 1<<(64-e.shift))
	e.key = internKey(opts.Mappings)
	for _, m := range opts.Mappings {
		if !m.Addr.Addr().IsValid() {
			continue // Config validation reports these; the encoder just ignores them
		}
		if m.NFFQDN != "" {
			e.byFQDN[asciiLower(m.NFFQDN)] = m.Addr
		}
		if m.NFInstanceID != "" {
			e.byID[m.NFInstanceID] = m.Addr
		}
	}
	e.hblock.b = make([]byte, 0, 1024)
	e.hp = hpack.NewEncoder(&e.hblock)
	// No dynamic table: fields are never indexed, so every header block
	// decodes with a fresh decoder. Encoding one field flushes the pending
	// "table size update", so no later block carries one.
	e.hp.SetMaxDynamicTableSize(0)
	_ = e.hp.WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
	e.hblock.b = e.hblock.b[:0]
	return e
}

// Reset forgets all flows: the next copy of each flow is preceded by its
// set-up records again. Call it whenever the global header is re-sent (a new
// connection), since the reader starts from scratch.
func (e *Encoder) Reset() { clear(e.flows) }

// slot is key's entry in the flow table: one hash and one comparison, where
// a Go map of tens of thousands of flows probes its groups for every new
// flow.
func (e *Encoder) slot(key flowKey) *flowSlot {
	c, v := key.client.Addr().As16(), key.server.Addr().As16()
	le := binary.LittleEndian
	h := (le.Uint64(c[:8]) ^ le.Uint64(c[8:])*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	h = (h ^ le.Uint64(v[:8]) ^ le.Uint64(v[8:])*0xc4ceb9fe1a85ec53) * 0x9e3779b97f4a7c15
	h = (h ^ uint64(key.client.Port())<<16 ^ uint64(key.server.Port())) * 0xff51afd7ed558ccd
	return &e.flows[h>>e.shift]
}

// AppendHeader appends the pcap global header to dst.
func (e *Encoder) AppendHeader(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, pcapMagicNanos)
	dst = binary.LittleEndian.AppendUint16(dst, 2)
	dst = binary.LittleEndian.AppendUint16(dst, 4)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // thiszone
	dst = binary.LittleEndian.AppendUint32(dst, 0) // sigfigs
	dst = binary.LittleEndian.AppendUint32(dst, pcapSnapLen)
	return binary.LittleEndian.AppendUint32(dst, linkTypeEthernet)
}

// copyInfo is what one scan of a copy's headers yields.
type copyInfo struct {
	request  bool
	https    bool
	streamID uint32
}

func scanHeaders(c *nfcopy.Copy) copyInfo {
	var ci copyInfo
	hasStatus := false
	for i := range c.Headers {
		h := &c.Headers[i]
		if len(h.Values) == 0 {
			continue
		}
		switch {
		case h.Name == ":status":
			hasStatus = true
		case h.Name == ":scheme" || strings.EqualFold(h.Name, "x-http2-scheme"):
			if h.Values[0] == "https" {
				ci.https = true
			}
		case strings.EqualFold(h.Name, "x-http2-stream-id"):
			if n, err := strconv.ParseUint(h.Values[0], 10, 31); err == nil && n > 0 {
				ci.streamID = uint32(n)
			}
		}
	}
	switch c.Direction {
	case nfcopy.RequestIngress, nfcopy.RequestEgress:
		ci.request = true
	case nfcopy.ResponseIngress, nfcopy.ResponseEgress:
		ci.request = false
	default:
		ci.request = !hasStatus
	}
	return ci
}

// AppendCopy appends the pcap record(s) of one copy to dst: the flow's set-up
// records the first time the flow is seen, then the copy's HEADERS (+
// CONTINUATION) and DATA frames in one TCP segment, or several when they
// exceed what one IP packet holds.
func (e *Encoder) AppendCopy(dst []byte, c *nfcopy.Copy) []byte {
	return e.AppendCopyFrom(dst, c, nil)
}

// AppendCopyFrom is AppendCopy for a copy that sh (nil: none) may hold a
// shared encoding of: when it holds one of this encoder's key, the copy's
// frames, addresses and payload checksum are taken from there. The bytes
// are the same either way.
func (e *Encoder) AppendCopyFrom(dst []byte, c *nfcopy.Copy, sh *Shared) []byte {
	if p := sh.encoding(c); p != nil && p.key == e.key {
		key := flowKey{p.client, p.server}
		slot, fl, dst := e.flow(dst, c.Timestamp, key)
		dst = e.appendSegments(dst, c.Timestamp, key, &fl, p.request, p.payload, p.sum)
		*slot = flowSlot{key: key, st: fl, used: true}
		return dst
	}
	ci := scanHeaders(c)
	client, server := e.endpoints(c, ci)
	key := flowKey{client, server}
	slot, fl, dst := e.flow(dst, c.Timestamp, key)
	sid, ok := streamID(c, ci)
	if !ok {
		sid = fl.nextStream
		if ci.request {
			fl.nextStream += 2
			if fl.nextStream > 0x7fffffff {
				fl.nextStream = 1
			}
		}
	}
	e.payload = e.appendFrames(e.payload[:0], c, sid)
	dst = e.appendSegments(dst, c.Timestamp, key, &fl, ci.request, e.payload, noSum)
	*slot = flowSlot{key: key, st: fl, used: true}
	return dst
}

// flow returns key's slot and state, appending the flow's set-up records
// to dst first when the slot holds another flow (or none).
func (e *Encoder) flow(dst []byte, ts int64, key flowKey) (*flowSlot, flowState, []byte) {
	slot := e.slot(key)
	fl := slot.st
	if !slot.used || slot.key != key {
		h := hashAddrPort(hashAddrPort(fnvOffset, key.client), key.server)
		fl = flowState{clientSeq: uint32(h), serverSeq: uint32(h >> 32), nextStream: 1}
		dst = e.appendSetup(dst, ts, key, &fl)
	}
	return slot, fl, dst
}

// streamID is the HTTP/2 stream of c when the copy alone tells it: its
// x-http2-stream-id, else one derived from its correlation id; ok=false
// means the flow numbers it (the next client stream).
func streamID(c *nfcopy.Copy, ci copyInfo) (uint32, bool) {
	switch {
	case ci.streamID != 0:
		return ci.streamID, true
	case c.CorrelationID != "":
		// Stable odd (client-initiated) id so the request and response
		// copies of one transaction share a stream.
		return uint32(hashString(fnvOffset, c.CorrelationID)&0x3fffffff)*2 + 1, true
	}
	return 0, false
}

// appendSetup emits the client's preface+SETTINGS and the server's SETTINGS.
// Header table size is left at its default: announcing 0 would oblige every
// following block to start with a table size update (RFC 7541 §4.2).
func (e *Encoder) appendSetup(dst []byte, ts int64, key flowKey, fl *flowState) []byte {
	const windowIncrement = 1<<31 - 1 - 65535 // open the connection window fully
	p := append(e.payload[:0], h2Preface...)
	p = appendFrameHeader(p, 6, frameSettings, 0, 0)
	p = appendSetting(p, 0x2, 0) // ENABLE_PUSH off
	p = appendFrameHeader(p, 4, frameWindowUpdate, 0, 0)
	p = binary.BigEndian.AppendUint32(p, windowIncrement)
	dst = e.appendSegments(dst, ts, key, fl, true, p, noSum)

	p = appendFrameHeader(p[:0], 6, frameSettings, 0, 0)
	p = appendSetting(p, 0x3, 1000) // MAX_CONCURRENT_STREAMS
	p = appendFrameHeader(p, 0, frameSettings, flagAck, 0)
	p = appendFrameHeader(p, 4, frameWindowUpdate, 0, 0)
	p = binary.BigEndian.AppendUint32(p, windowIncrement)
	dst = e.appendSegments(dst, ts, key, fl, false, p, noSum)
	e.payload = p
	return dst
}

func appendSetting(b []byte, id uint16, v uint32) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	return binary.BigEndian.AppendUint32(b, v)
}

func appendFrameHeader(b []byte, length int, typ, flags byte, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

// isDroppedHeader reports header fields (name lowercase) that must not appear
// in the HTTP/2 header block: the record's stream-id annotation and
// connection-specific fields (RFC 9113 §8.2.2).
func isDroppedHeader(name string, values []string) bool {
	switch name {
	case "x-http2-stream-id", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	case "te":
		return len(values) != 1 || values[0] != "trailers"
	}
	return false
}

// appendFrames appends the HEADERS (+CONTINUATION) and DATA frames of c.
func (e *Encoder) appendFrames(p []byte, c *nfcopy.Copy, sid uint32) []byte {
	e.hblock.b = e.hblock.b[:0]
	// Pseudo-headers first (RFC 9113 §8.3), each in record order.
	for pass := 0; pass < 2; pass++ {
		for i := range c.Headers {
			h := &c.Headers[i]
			pseudo := len(h.Name) > 0 && h.Name[0] == ':'
			if pseudo != (pass == 0) {
				continue
			}
			name := asciiLower(h.Name) // HTTP/2 field names are lowercase
			if isDroppedHeader(name, h.Values) {
				continue
			}
			for _, v := range h.Values {
				e.hblock.b = appendLiteralField(e.hblock.b, name, v)
			}
		}
	}
	block := e.hblock.b
	body := c.Body
	flags := byte(flagEndHeaders)
	if len(body) == 0 {
		flags |= flagEndStream
	}
	first := true
	for {
		n := min(len(block), h2MaxFrameSize)
		typ, f := byte(frameContinuation), byte(0)
		if first {
			typ, f = frameHeaders, flags&flagEndStream
		}
		if n == len(block) {
			f |= flagEndHeaders
		}
		p = appendFrameHeader(p, n, typ, f, sid)
		p = append(p, block[:n]...)
		block = block[n:]
		first = false
		if len(block) == 0 {
			break
		}
	}
	for len(body) > 0 {
		n := min(len(body), h2MaxFrameSize)
		f := byte(0)
		if n == len(body) {
			f = flagEndStream
		}
		p = appendFrameHeader(p, n, frameData, f, sid)
		p = append(p, body[:n]...)
		body = body[n:]
	}
	return p
}

// asciiLower lowercases ASCII letters only (header names are tokens; other
// bytes pass through untouched) and allocates only when there is one.
func asciiLower(s string) string {
	if !hasUpper(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// appendSegments appends payload as one or more TCP segments (records) of the
// flow, client→server when fromClient, advancing that direction's sequence.
// Each record is written in place: pcap record header, Ethernet, IPv4 or IPv6
// and TCP headers (no options), the payload, then the checksums over what is
// already in dst. The payload is copied once. psum, unless it is noSum, is
// the payload's one's-complement sum (onesSum), known beforehand; it is
// used when the payload fits one segment, and the checksum then reads only
// the TCP header.
func (e *Encoder) appendSegments(dst []byte, ts int64, key flowKey, fl *flowState, fromClient bool, payload []byte, psum uint64) []byte {
	src, dstAP := key.server, key.client
	seq, ack := &fl.serverSeq, fl.clientSeq
	if fromClient {
		src, dstAP = key.client, key.server
		seq, ack = &fl.clientSeq, fl.serverSeq
	}
	v4 := src.Addr().Is4()
	maxSeg, ipLen := maxSegment6, ipv6HeaderLen
	if v4 {
		maxSeg, ipLen = maxSegment4, ipv4HeaderLen
	}
	srcMAC, dstMAC := macFor(src.Addr()), macFor(dstAP.Addr())
	if ts < 0 {
		ts = 0
	}
	whole := len(payload)
	for {
		n := min(len(payload), maxSeg)
		pktLen := ethHeaderLen + ipLen + tcpHeaderLen + n
		dst = slices.Grow(dst, pcapRecordHeaderLen+pktLen)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(ts/1e9))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(ts%1e9))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(pktLen))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(pktLen))
		dst = append(dst, dstMAC[:]...)
		dst = append(dst, srcMAC[:]...)
		var pseudo uint64 // the TCP pseudo-header's sum
		if v4 {
			dst = append(dst, 0x08, 0x00) // EtherType IPv4
			ip := len(dst)
			s4, d4 := src.Addr().As4(), dstAP.Addr().As4()
			total := ipv4HeaderLen + tcpHeaderLen + n
			dst = append(dst,
				0x45, 0, byte(total>>8), byte(total), // version 4, IHL 5, TOS, total length
				0, 0, 0x40, 0, // id, flags DF, fragment offset
				64, 6, 0, 0) // TTL, protocol TCP, checksum (below)
			dst = append(dst, s4[:]...)
			dst = append(dst, d4[:]...)
			binary.BigEndian.PutUint16(dst[ip+10:], checksum(dst[ip:ip+ipv4HeaderLen], 0))
			pseudo = sum16(s4[:], sum16(d4[:], uint64(6)+uint64(tcpHeaderLen+n)))
		} else {
			dst = append(dst, 0x86, 0xdd) // EtherType IPv6
			s16, d16 := src.Addr().As16(), dstAP.Addr().As16()
			pl := tcpHeaderLen + n
			dst = append(dst, 0x60, 0, 0, 0, byte(pl>>8), byte(pl), 6, 64) // version 6, class, label, payload length, TCP, hop limit
			dst = append(dst, s16[:]...)
			dst = append(dst, d16[:]...)
			pseudo = sum16(s16[:], sum16(d16[:], uint64(6)+uint64(pl)))
		}
		tcp := len(dst)
		dst = binary.BigEndian.AppendUint16(dst, src.Port())
		dst = binary.BigEndian.AppendUint16(dst, dstAP.Port())
		dst = binary.BigEndian.AppendUint32(dst, *seq)
		dst = binary.BigEndian.AppendUint32(dst, ack)
		dst = append(dst, 5<<4, 0x18, 0xff, 0xff, 0, 0, 0, 0) // data offset 5, PSH|ACK, window 65535, checksum, urgent
		dst = append(dst, payload[:n]...)
		if psum != noSum && n == whole { // the only segment
			binary.BigEndian.PutUint16(dst[tcp+16:], checksum(dst[tcp:tcp+tcpHeaderLen], pseudo+psum))
		} else {
			binary.BigEndian.PutUint16(dst[tcp+16:], checksum(dst[tcp:], pseudo))
		}
		*seq += uint32(n)
		payload = payload[n:]
		if len(payload) == 0 {
			return dst
		}
	}
}

// Header sizes of the records appendSegments writes.
const (
	pcapRecordHeaderLen = 16
	ethHeaderLen        = 14
	ipv4HeaderLen       = 20
	ipv6HeaderLen       = 40
	tcpHeaderLen        = 20
)

// sum16 adds b to sum as big-endian 16-bit words (b has even length), the
// one's-complement sum of RFC 1071 before folding.
func sum16(b []byte, sum uint64) uint64 {
	for len(b) >= 2 {
		sum += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	return sum
}

// noSum tells appendSegments that the payload's sum is not known.
const noSum = ^uint64(0)

// checksum is the Internet checksum of b with initial (unfolded) sum init.
func checksum(b []byte, init uint64) uint16 { return ^uint16(onesSum(b, init)) }

// onesSum is the one's-complement sum of b as big-endian 16-bit words (an
// odd last byte padded with zero) plus init, folded to 16 bits. Sums of
// parts at even offsets add up to the sum of the whole. It adds b as
// little-endian 32-bit words into four 64-bit accumulators (no
// carry chain between them, and no overflow below 2^32 words): a
// one's-complement sum does not depend on byte order as long as every word
// is read the same way (RFC 1071 §2(B)), so the folded sum is byte-swapped
// once at the end.
func onesSum(b []byte, init uint64) uint64 {
	var a0, a1, a2, a3 uint64
	for len(b) >= 16 {
		a0 += uint64(binary.LittleEndian.Uint32(b))
		a1 += uint64(binary.LittleEndian.Uint32(b[4:]))
		a2 += uint64(binary.LittleEndian.Uint32(b[8:]))
		a3 += uint64(binary.LittleEndian.Uint32(b[12:]))
		b = b[16:]
	}
	for len(b) >= 4 {
		a0 += uint64(binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	acc := a0 + a1 + a2 + a3 // each < 2^62 for any packet: no overflow
	// Fold the little-endian sum to 16 bits, then to big-endian.
	s := acc>>32 + acc&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	sum := uint64(bits.ReverseBytes16(uint16(s)))
	// The tail (fewer than 4 bytes) and init in big-endian words.
	for len(b) >= 2 {
		sum += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	sum += init
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return sum
}

// macFor derives a stable locally-administered unicast MAC from an address.
func macFor(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x02, b[11], b[12], b[13], b[14], b[15]}
}
