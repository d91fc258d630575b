// Package synthetic turns NF message copies into a libpcap-format stream of
// synthesized Ethernet/IP/TCP packets carrying HTTP/2 frames, so that probes,
// tshark and Wireshark decode the copies as if they had been captured on the
// wire. The stream goes to a TCP or TLS consumer (Sink) or to any io.Writer
// (Writer; an os.File gives a .pcap file that tools open directly).
//
// Stream layout: a pcap global header (magic 0xa1b23c4d: nanosecond
// timestamps, version 2.4, snaplen 262144, linktype Ethernet), then records.
// The first time the encoder sees a flow it opens it: a TCP handshake
// (SYN, SYN-ACK, ACK; EncoderOptions.NoHandshake leaves it out), the
// client's connection preface + SETTINGS + WINDOW_UPDATE, and the server's
// SETTINGS + SETTINGS ACK + WINDOW_UPDATE, so every synthetic TCP flow
// decodes on its own. Each copy is then its HEADERS (+ CONTINUATION) and
// DATA frames, in segments of at most the MSS. A flow pushed out of the flow
// table is closed with FIN; if it has more copies later it opens afresh, on
// a new initial sequence number, so no flow's sequence numbers go backwards.
// Header blocks are HPACK-encoded without the dynamic table (static-table
// indices and literals only), so any frame decodes alone even when a reader
// joins the stream midway.
//
// Stream ids are the flow's own: each request opens the next client stream
// (the NF's own x-http2-stream-id when it is odd and above the flow's last,
// else renumbered), and a response goes on the stream of its request, found
// by correlation id, hop-by-hop id, leg and copying NF.
package synthetic

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
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

	// DefaultMSS is the largest TCP payload of a segment by default: an
	// Ethernet MTU of 1500 less the IPv4 and TCP headers.
	DefaultMSS = 1460

	defaultMaxFlows = 100_000

	// ackEvery: a side that has received this much since it last sent
	// anything sends a bare ACK, as a receiver's delayed ACKs do, so no
	// sender has more in flight than the 65,535-byte window it is offered.
	ackEvery = 32 << 10

	// maxPending bounds the requests remembered for their responses, and
	// the responses copied first for their requests.
	maxPending = 1 << 16

	// HTTP ports: what the synthetic server listens on when its copy's
	// port is not one Wireshark dissects as HTTP (see decodablePort).
	defaultHTTPPort  = 8080
	defaultHTTPSPort = 8088
	// diameterPort is Diameter's (RFC 6733), where Wireshark's diameter
	// dissector takes TCP.
	diameterPort = 3868
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
	// MaxFlows is how many flows the encoder keeps open; 0 means 100,000
	// (10.6 MB when all are open: flowTable). Past it, the least
	// recently used flow is closed with FIN; it opens afresh, as a new TCP
	// connection, if it has another copy.
	MaxFlows int
	// MSS is the largest TCP payload of one segment; 0 means DefaultMSS
	// (1460). At most 65,495.
	MSS int
	// KeepPorts writes server ports as the copy or mapping gives them.
	// By default a server port that Wireshark does not dissect as HTTP
	// (443 among them, which it hands to TLS: the synthetic stream is
	// cleartext) becomes 8080 for an http copy and 8088 for an https one,
	// so stock Wireshark decodes every copy without "decode as".
	KeepPorts bool
	// NoHandshake leaves out the SYN/SYN-ACK/ACK that opens each flow and
	// the FIN exchange that closes it.
	NoHandshake bool
	// ClientPort, when set, gives the client port of a copy's flow (0:
	// the usual one): an export gives each transaction flows of its own.
	// Such an encoder takes no shared encodings.
	ClientPort func(*nfcopy.Copy) uint16
}

type flowKey struct{ client, server netip.AddrPort }

type flowState struct {
	clientSeq, serverSeq uint32 // next sequence number in each direction
	clientAck, serverAck uint32 // what each side last acknowledged of the other
	lastStream           uint32 // the flow's highest client stream id so far
	conn                 uint32 // which opening of the flow this is (Encoder.conns)
}

// pendingStream is a request whose response has not been seen: the flow
// (and which opening of it) and the stream it went on.
type pendingStream struct {
	key  flowKey
	conn uint32
	sid  uint32
	fifo uint64 // its place in Encoder.pendingOrder
}

// Encoder builds pcap records from copies. It is not safe for concurrent use;
// all its scratch space is reused, so encoding a copy does not allocate once
// the buffers have grown.
type Encoder struct {
	byFQDN map[string]netip.AddrPort
	byID   map[string]netip.AddrPort
	flows  *flowTable
	conns  uint32
	// seqClock counts the sequence numbers the encoder has used, in every
	// flow and direction: the clock of the initial sequence numbers.
	seqClock uint32
	// evicted counts flows closed to make room for another (Evicted).
	evicted uint64
	// respFirst counts responses written before their request (ResponsesFirst).
	respFirst uint64

	mss         int
	keepPorts   bool
	noHandshake bool

	pending      map[uint64]pendingStream
	pendingOrder []uint64 // ring of pending keys, oldest first from pendingHead
	pendingHead  uint64
	pendingN     uint64

	hp      *hpack.Encoder
	hblock  appendWriter // header block scratch
	payload []byte       // HTTP/2 frames scratch

	key        shareKey // encoders of one key encode alike (their mappings, ports)
	shares     bool     // whether encodings are shared with others of key
	clientPort func(*nfcopy.Copy) uint16
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// NewEncoder returns an Encoder with an empty flow table.
func NewEncoder(opts EncoderOptions) *Encoder {
	e := &Encoder{
		byFQDN:      make(map[string]netip.AddrPort),
		byID:        make(map[string]netip.AddrPort),
		payload:     make([]byte, 0, 4096),
		mss:         opts.MSS,
		keepPorts:   opts.KeepPorts,
		noHandshake: opts.NoHandshake,
		pending:     make(map[uint64]pendingStream),
	}
	if e.mss <= 0 {
		e.mss = DefaultMSS
	}
	e.mss = min(e.mss, maxSegment4)
	n := opts.MaxFlows
	if n <= 0 {
		n = defaultMaxFlows
	}
	e.flows = newFlowTable(n)
	e.key = internKey(opts.Mappings, opts.KeepPorts, e.mss)
	// With client ports of its own, no shared encoding has its addresses.
	e.clientPort = opts.ClientPort
	e.shares = e.clientPort == nil
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

// Evicted is how many flows the encoder has closed to make room for others
// in its table (EncoderOptions.MaxFlows): each comes back, if it does, as a
// new TCP connection.
func (e *Encoder) Evicted() uint64 { return e.evicted }

// ResponsesFirst is how many responses (and Diameter answers) the encoder
// wrote before their request, as it got them: each on a stream of its
// flow, where its request goes when it comes.
func (e *Encoder) ResponsesFirst() uint64 { return e.respFirst }

// Reset forgets all flows: the next copy of each flow opens it again. Call
// it whenever the global header is re-sent (a new connection), since the
// reader starts from scratch.
func (e *Encoder) Reset() {
	e.flows.reset()
	clear(e.pending)
	e.pendingHead, e.pendingN = 0, 0
	e.seqClock = 0
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
	streamID uint32 // the NF's own, from x-http2-stream-id; 0 if none
	// Who the peers are, for copies whose metadata does not say
	// (3gpp-Sbi-NF-Peer-Info srcinst/dstinst, User-Agent, :authority).
	peerSrc, peerDst, userAgent, authority string
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
		case h.Name == ":authority":
			ci.authority = h.Values[0]
		case h.Name == ":scheme" || strings.EqualFold(h.Name, "x-http2-scheme"):
			if h.Values[0] == "https" {
				ci.https = true
			}
		case strings.EqualFold(h.Name, "x-http2-stream-id"):
			if n, err := strconv.ParseUint(h.Values[0], 10, 31); err == nil && n > 0 {
				ci.streamID = uint32(n)
			}
		case strings.EqualFold(h.Name, "3gpp-sbi-nf-peer-info"):
			ci.peerSrc, ci.peerDst = peerInfo(h.Values[0])
		case strings.EqualFold(h.Name, "user-agent"):
			ci.userAgent = h.Values[0]
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

// peerInfo reads the sending and receiving NF instances of a
// 3gpp-Sbi-NF-Peer-Info header (TS 29.500 §5.2.3.2.14:
// "srcinst=...; srcservinst=...; dstinst=...; dstscp=..."), preferring the
// NF instance, then the SCP or SEPP FQDN that stands in for it.
func peerInfo(v string) (src, dst string) {
	var srcSCP, dstSCP string
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ";")
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "srcinst":
			src = strings.TrimSpace(val)
		case "dstinst":
			dst = strings.TrimSpace(val)
		case "srcscp", "srcsepp":
			srcSCP = strings.TrimSpace(val)
		case "dstscp", "dstsepp":
			dstSCP = strings.TrimSpace(val)
		}
	}
	if src == "" {
		src = srcSCP
	}
	if dst == "" {
		dst = dstSCP
	}
	return src, dst
}

// AppendCopy appends the pcap record(s) of one copy to dst: the flow's
// opening the first time the flow is seen (and the closing of a flow it
// pushes out of the table), then the copy's HEADERS (+ CONTINUATION) and
// DATA frames in segments of at most the MSS.
func (e *Encoder) AppendCopy(dst []byte, c *nfcopy.Copy) []byte {
	return e.AppendCopyFrom(dst, c, nil)
}

// AppendCopyFrom is AppendCopy for a copy that sh (nil: none) may hold a
// shared encoding of: when it holds one of this encoder's key, the copy's
// frames and addresses are taken from there, and only the stream id is
// this encoder's. The bytes are the same either way.
func (e *Encoder) AppendCopyFrom(dst []byte, c *nfcopy.Copy, sh *Shared) []byte {
	if c.Protocol == nfcopy.DiameterProtocol {
		return e.appendDiameter(dst, c)
	}
	var (
		key     flowKey
		request bool
		own     uint32
		pk      uint64
		shared  *precoded
	)
	if p := sh.encoding(c); p != nil && e.shares && p.key == e.key {
		key, request, own, pk, shared = flowKey{p.client, p.server}, p.request, p.ownStream, p.pair, p
	} else {
		ci := scanHeaders(c)
		client, server := e.endpoints(c, ci)
		key, request, own, pk = flowKey{client, server}, ci.request, ci.streamID, c.PairKey()
	}
	// A response goes on its request's stream, on its request's flow
	// (which its own headers may not name as the request's did); a
	// request whose response was copied first goes on that response's.
	sid := uint32(0)
	if ps, ok := e.partnerOf(pk, request); ok {
		key, sid = ps.key, ps.sid
	}
	slot, dst := e.flow(dst, c.Timestamp, key, true)
	if sid == 0 {
		sid = e.nextStream(&slot.st, own)
		if sid == 0 { // the flow's stream ids are used up: reopen it
			dst = e.close(dst, c.Timestamp, slot)
			slot, dst = e.flow(dst, c.Timestamp, key, true)
			sid = e.nextStream(&slot.st, own)
		}
		e.remember(pk, request, pendingStream{key: key, conn: slot.st.conn, sid: sid})
	}
	if shared != nil {
		return e.appendShared(dst, c.Timestamp, key, &slot.st, request, shared, sid)
	}
	e.payload = e.appendFrames(e.payload[:0], c, sid)
	return e.appendSegments(dst, c.Timestamp, key, &slot.st, request, e.payload, tcpPSHACK)
}

// partnerOf takes, for a copy of pair key pk (0: none), the pending other
// half of its pair: for a response its request, for a request a response
// copied before it; when the flow it went on is still the same opening.
func (e *Encoder) partnerOf(pk uint64, request bool) (pendingStream, bool) {
	if pk == 0 {
		return pendingStream{}, false
	}
	if request {
		pk = answeredKey(pk)
	}
	ps, ok := e.pending[pk]
	if !ok {
		return ps, false
	}
	delete(e.pending, pk)
	sl := e.flows.find(ps.key)
	return ps, sl != nil && sl.st.conn == ps.conn
}

// nextStream is the stream a new message of the flow goes on: the NF's own
// id when it is a client id above every id the flow has used, else the
// flow's next one; 0 when the flow has run out of ids.
func (e *Encoder) nextStream(fl *flowState, own uint32) uint32 {
	if own&1 == 1 && own > fl.lastStream {
		fl.lastStream = own
		return own
	}
	if fl.lastStream >= 0x7fffffff-2 {
		return 0
	}
	if fl.lastStream == 0 {
		fl.lastStream = 1
	} else {
		fl.lastStream += 2
	}
	return fl.lastStream
}

// answeredKey is where a response copied before its request is kept in
// Encoder.pending: apart from the requests (pair keys are odd, these even).
func answeredKey(pk uint64) uint64 { return pk * 0x9e3779b97f4a7c15 &^ 1 }

// remember keeps, for the other half of pair pk (0: none), the stream a
// request or a response copied before its request went on, forgetting the
// oldest when maxPending are kept.
func (e *Encoder) remember(pk uint64, request bool, ps pendingStream) {
	if pk == 0 {
		return
	}
	if !request {
		pk = answeredKey(pk)
		e.respFirst++
	}
	if e.pendingOrder == nil {
		e.pendingOrder = make([]uint64, maxPending)
	}
	if e.pendingN == maxPending {
		old := e.pendingOrder[e.pendingHead%maxPending]
		if p, ok := e.pending[old]; ok && p.fifo == e.pendingHead {
			delete(e.pending, old)
		}
		e.pendingHead++
		e.pendingN--
	}
	ps.fifo = e.pendingHead + e.pendingN
	e.pendingOrder[ps.fifo%maxPending] = pk
	e.pendingN++
	e.pending[pk] = ps
}

// flow returns key's slot, opening the flow first when the table does not
// hold it: when the table is full, the least recently used flow is closed to
// make room. A new HTTP/2 flow (h2) starts with the connection preface and
// settings.
func (e *Encoder) flow(dst []byte, ts int64, key flowKey, h2 bool) (*flowSlot, []byte) {
	if slot := e.flows.find(key); slot != nil {
		return slot, dst
	}
	if e.flows.full() {
		dst = e.close(dst, ts, e.flows.victim())
		e.evicted++
	}
	e.conns++
	// RFC 6528: the initial sequence numbers are a hash of the flow plus a
	// clock. The clock is what the encoder has written, in sequence
	// numbers (seqClock), not the copies' time: a flow pushed out of the
	// table and opened again starts beyond where its last opening ended,
	// in both directions, even when the same copies come again (a replay,
	// a re-delivery) with the same timestamps, whose 4 µs clock opened it
	// with the very same numbers (tshark then reads the new connection as
	// retransmissions of the old, and decodes none of it).
	h := hashAddrPort(hashAddrPort(fnvOffset, key.client), key.server)
	isnC, isnS := uint32(h)+e.seqClock, uint32(h>>32)+e.seqClock
	slot := e.flows.add(key, flowState{conn: e.conns})
	fl := &slot.st
	fl.clientSeq, fl.serverSeq = isnC, isnS
	if !e.noHandshake {
		dst = e.appendSegments(dst, ts, key, fl, true, nil, tcpSYN)
		dst = e.appendSegments(dst, ts, key, fl, false, nil, tcpSYN|tcpACK)
		dst = e.appendSegments(dst, ts, key, fl, true, nil, tcpACK)
	}
	fl.clientAck, fl.serverAck = fl.serverSeq, fl.clientSeq
	if !h2 {
		return slot, dst
	}
	return slot, e.appendSetup(dst, ts, key, fl)
}

// close ends slot's flow: FIN from the client, FIN from the server, the
// client's last ACK (nothing without the handshake), and frees the slot.
func (e *Encoder) close(dst []byte, ts int64, slot *flowSlot) []byte {
	if !e.noHandshake {
		fl := &slot.st
		dst = e.appendSegments(dst, ts, slot.key, fl, true, nil, tcpFIN|tcpACK)
		dst = e.appendSegments(dst, ts, slot.key, fl, false, nil, tcpFIN|tcpACK)
		dst = e.appendSegments(dst, ts, slot.key, fl, true, nil, tcpACK)
	}
	e.flows.remove(slot)
	return dst
}

// appendSetup emits the client's preface+SETTINGS and the server's SETTINGS.
// Header table size is left at its default: announcing 0 would oblige every
// following block to start with a table size update (RFC 7541 §4.2). Both
// sides announce the largest initial stream window and open the connection
// window fully, so that no body, however large, exceeds a flow-control
// window and no WINDOW_UPDATE is due later.
func (e *Encoder) appendSetup(dst []byte, ts int64, key flowKey, fl *flowState) []byte {
	const (
		maxWindow       = 1<<31 - 1
		windowIncrement = maxWindow - 65535 // the connection window starts at 65,535
	)
	p := append(e.payload[:0], h2Preface...)
	p = appendFrameHeader(p, 12, frameSettings, 0, 0)
	p = appendSetting(p, 0x2, 0)         // ENABLE_PUSH off
	p = appendSetting(p, 0x4, maxWindow) // INITIAL_WINDOW_SIZE
	p = appendFrameHeader(p, 4, frameWindowUpdate, 0, 0)
	p = binary.BigEndian.AppendUint32(p, windowIncrement)
	dst = e.appendSegments(dst, ts, key, fl, true, p, tcpPSHACK)

	p = appendFrameHeader(p[:0], 6, frameSettings, 0, 0)
	p = appendSetting(p, 0x4, maxWindow) // INITIAL_WINDOW_SIZE
	p = appendFrameHeader(p, 0, frameSettings, flagAck, 0)
	p = appendFrameHeader(p, 4, frameWindowUpdate, 0, 0)
	p = binary.BigEndian.AppendUint32(p, windowIncrement)
	dst = e.appendSegments(dst, ts, key, fl, false, p, tcpPSHACK)
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
