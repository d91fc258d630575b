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
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/http2/hpack"

	"github.com/signalbox/signalbox/internal/copy"
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

	defaultMaxFlows = 65536
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
	// MaxFlows bounds the flow table (per-flow sequence numbers); when it
	// is full the table is cleared and flows restart with fresh set-up
	// records. 0 means 65536.
	MaxFlows int
}

type flowKey struct{ client, server netip.AddrPort }

type flowState struct {
	clientSeq, serverSeq uint32 // next sequence number in each direction
	nextStream           uint32 // for copies without stream id and correlation id
}

// Encoder builds pcap records from copies. It is not safe for concurrent use;
// all its scratch space is reused, so encoding a copy does not allocate once
// the buffers have grown.
type Encoder struct {
	byFQDN   map[string]netip.AddrPort
	byID     map[string]netip.AddrPort
	maxFlows int
	flows    map[flowKey]flowState

	hp      *hpack.Encoder
	hblock  appendWriter // header block scratch
	payload []byte       // HTTP/2 frames scratch

	sbuf   gopacket.SerializeBuffer
	sopts  gopacket.SerializeOptions
	eth    layers.Ethernet
	ip4    layers.IPv4
	ip6    layers.IPv6
	tcp    layers.TCP
	pl     gopacket.Payload
	stack4 []gopacket.SerializableLayer
	stack6 []gopacket.SerializableLayer

	srcMAC, dstMAC [6]byte
	src4, dst4     [4]byte
	src6, dst6     [16]byte
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// NewEncoder returns an Encoder with an empty flow table.
func NewEncoder(opts EncoderOptions) *Encoder {
	e := &Encoder{
		byFQDN:   make(map[string]netip.AddrPort),
		byID:     make(map[string]netip.AddrPort),
		maxFlows: opts.MaxFlows,
		flows:    make(map[flowKey]flowState),
		sbuf:     gopacket.NewSerializeBufferExpectedSize(64, 4096),
		sopts:    gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		payload:  make([]byte, 0, 4096),
	}
	if e.maxFlows <= 0 {
		e.maxFlows = defaultMaxFlows
	}
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

	e.eth.SrcMAC = net.HardwareAddr(e.srcMAC[:])
	e.eth.DstMAC = net.HardwareAddr(e.dstMAC[:])
	e.ip4 = layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP,
		SrcIP: net.IP(e.src4[:]), DstIP: net.IP(e.dst4[:])}
	e.ip6 = layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: net.IP(e.src6[:]), DstIP: net.IP(e.dst6[:])}
	e.tcp = layers.TCP{PSH: true, ACK: true, Window: 65535}
	e.stack4 = []gopacket.SerializableLayer{&e.eth, &e.ip4, &e.tcp, &e.pl}
	e.stack6 = []gopacket.SerializableLayer{&e.eth, &e.ip6, &e.tcp, &e.pl}
	return e
}

// Reset forgets all flows: the next copy of each flow is preceded by its
// set-up records again. Call it whenever the global header is re-sent (a new
// connection), since the reader starts from scratch.
func (e *Encoder) Reset() { clear(e.flows) }

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

func scanHeaders(c *copy.Copy) copyInfo {
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
	case copy.RequestIngress, copy.RequestEgress:
		ci.request = true
	case copy.ResponseIngress, copy.ResponseEgress:
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
func (e *Encoder) AppendCopy(dst []byte, c *copy.Copy) []byte {
	ci := scanHeaders(c)
	client, server := e.endpoints(c, ci)
	key := flowKey{client, server}
	fl, seen := e.flows[key]
	ts := c.Timestamp
	if !seen {
		if len(e.flows) >= e.maxFlows {
			clear(e.flows)
		}
		h := hashAddrPort(hashAddrPort(fnvOffset, client), server)
		fl = flowState{clientSeq: uint32(h), serverSeq: uint32(h >> 32), nextStream: 1}
		dst = e.appendSetup(dst, ts, key, &fl)
	}
	sid := ci.streamID
	if sid == 0 {
		if c.CorrelationID != "" {
			// Stable odd (client-initiated) id so the request and
			// response copies of one transaction share a stream.
			sid = uint32(hashString(fnvOffset, c.CorrelationID)&0x3fffffff)*2 + 1
		} else {
			sid = fl.nextStream
			if ci.request {
				fl.nextStream += 2
				if fl.nextStream > 0x7fffffff {
					fl.nextStream = 1
				}
			}
		}
	}
	e.payload = e.appendFrames(e.payload[:0], c, sid)
	dst = e.appendSegments(dst, ts, key, &fl, ci.request, e.payload)
	e.flows[key] = fl
	return dst
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
	dst = e.appendSegments(dst, ts, key, fl, true, p)

	p = appendFrameHeader(p[:0], 6, frameSettings, 0, 0)
	p = appendSetting(p, 0x3, 1000) // MAX_CONCURRENT_STREAMS
	p = appendFrameHeader(p, 0, frameSettings, flagAck, 0)
	p = appendFrameHeader(p, 4, frameWindowUpdate, 0, 0)
	p = binary.BigEndian.AppendUint32(p, windowIncrement)
	dst = e.appendSegments(dst, ts, key, fl, false, p)
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

// isDroppedHeader reports header fields that must not appear in the HTTP/2
// header block: the record's stream-id annotation and connection-specific
// fields (RFC 9113 §8.2.2).
func isDroppedHeader(name string, values []string) bool {
	switch asciiLower(name) {
	case "x-http2-stream-id", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	case "te":
		return len(values) != 1 || values[0] != "trailers"
	}
	return false
}

// appendFrames appends the HEADERS (+CONTINUATION) and DATA frames of c.
func (e *Encoder) appendFrames(p []byte, c *copy.Copy, sid uint32) []byte {
	e.hblock.b = e.hblock.b[:0]
	// Pseudo-headers first (RFC 9113 §8.3), each in record order.
	for pass := 0; pass < 2; pass++ {
		for i := range c.Headers {
			h := &c.Headers[i]
			pseudo := len(h.Name) > 0 && h.Name[0] == ':'
			if pseudo != (pass == 0) || isDroppedHeader(h.Name, h.Values) {
				continue
			}
			name := asciiLower(h.Name) // HTTP/2 field names are lowercase
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
func (e *Encoder) appendSegments(dst []byte, ts int64, key flowKey, fl *flowState, fromClient bool, payload []byte) []byte {
	src, dstAP := key.server, key.client
	seq, ack := &fl.serverSeq, fl.clientSeq
	if fromClient {
		src, dstAP = key.client, key.server
		seq, ack = &fl.clientSeq, fl.serverSeq
	}
	v4 := src.Addr().Is4()
	maxSeg := maxSegment6
	stack := e.stack6
	if v4 {
		maxSeg = maxSegment4
		stack = e.stack4
		e.src4 = src.Addr().As4()
		e.dst4 = dstAP.Addr().As4()
		e.eth.EthernetType = layers.EthernetTypeIPv4
	} else {
		e.src6 = src.Addr().As16()
		e.dst6 = dstAP.Addr().As16()
		e.eth.EthernetType = layers.EthernetTypeIPv6
	}
	e.srcMAC = macFor(src.Addr())
	e.dstMAC = macFor(dstAP.Addr())
	e.tcp.SrcPort = layers.TCPPort(src.Port())
	e.tcp.DstPort = layers.TCPPort(dstAP.Port())
	if err := e.tcp.SetNetworkLayerForChecksum(e.netLayer(v4)); err != nil {
		panic("synthetic: " + err.Error()) // unreachable: the layers are IPv4/IPv6
	}
	for {
		n := min(len(payload), maxSeg)
		e.tcp.Seq, e.tcp.Ack = *seq, ack
		e.pl = payload[:n]
		if err := gopacket.SerializeLayers(e.sbuf, e.sopts, stack...); err != nil {
			// Only reachable through a bug here (sizes are bounded above).
			panic("synthetic: serialize: " + err.Error())
		}
		dst = appendRecord(dst, ts, e.sbuf.Bytes())
		*seq += uint32(n)
		payload = payload[n:]
		if len(payload) == 0 {
			return dst
		}
	}
}

func (e *Encoder) netLayer(v4 bool) gopacket.NetworkLayer {
	if v4 {
		return &e.ip4
	}
	return &e.ip6
}

// appendRecord appends a pcap record header (nanosecond timestamps) and pkt.
func appendRecord(dst []byte, ts int64, pkt []byte) []byte {
	if ts < 0 {
		ts = 0
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(ts/1e9))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(ts%1e9))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(pkt)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(pkt)))
	return append(dst, pkt...)
}

// macFor derives a stable locally-administered unicast MAC from an address.
func macFor(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x02, b[11], b[12], b[13], b[14], b[15]}
}
