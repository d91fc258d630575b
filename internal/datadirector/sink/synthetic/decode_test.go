package synthetic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// message is one HTTP/2 message read back from a synthetic stream.
type message struct {
	ts             int64
	client, server netip.AddrPort
	fromClient     bool
	streamID       uint32
	fields         []hpack.HeaderField
	body           []byte
	// unpaired: a server message on a stream its client never opened (a
	// response whose request the stream did not carry).
	unpaired bool
}

type dirState struct {
	raw       []byte // bytes not yet framed
	in        bytes.Buffer
	fr        *http2.Framer
	nextSeq   uint32
	seqKnown  bool
	preface   bool
	block     []byte // header block being assembled
	blockSID  uint32
	pending   map[uint32]*message
	endOnHdrs bool
	// The client direction's view of its connection: the streams it has
	// opened, the highest one.
	lastStream uint32
	opened     map[uint32]bool
	synSeen    bool
	finSeen    bool
}

// streamStats counts what a decoded stream's TCP looked like.
type streamStats struct{ syns, fins, bareAcks, segments, maxPayload int }

// decodeStream reads a synthetic pcap stream back with gopacket and
// x/net/http2, checking lengths, checksums, sequence/ack numbers, TCP
// handshakes and closes, that client streams are opened in increasing order
// and that each header block decodes with a fresh HPACK decoder.
func decodeStream(data []byte) ([]message, error) {
	msgs, _, err := decodeStreamStats(data)
	return msgs, err
}

func decodeStreamStats(data []byte) ([]message, streamStats, error) {
	var st streamStats
	msgs, err := decodeStreamInto(data, &st)
	return msgs, st, err
}

func decodeStreamInto(data []byte, st *streamStats) ([]message, error) {
	r, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	if r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != pcapSnapLen {
		return nil, fmt.Errorf("link type %v snaplen %d", r.LinkType(), r.Snaplen())
	}
	if r.Resolution() != gopacket.TimestampResolutionNanosecond {
		return nil, fmt.Errorf("resolution %v, want ns", r.Resolution())
	}
	dirs := map[[2]netip.AddrPort]*dirState{}
	clientOf := map[[2]netip.AddrPort]netip.AddrPort{} // canonical flow -> client
	var out []message
	for n := 0; ; n++ {
		pkt, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", n, err)
		}
		p := gopacket.NewPacket(pkt, layers.LayerTypeEthernet, gopacket.Default)
		if el := p.ErrorLayer(); el != nil {
			return nil, fmt.Errorf("record %d: decode: %v", n, el.Error())
		}
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil {
			return nil, fmt.Errorf("record %d: no TCP layer", n)
		}
		if tcp.RST || tcp.URG {
			return nil, fmt.Errorf("record %d: RST or URG", n)
		}
		switch {
		case tcp.SYN && !tcp.ACK && !tcp.FIN && !tcp.PSH, tcp.SYN && tcp.ACK && !tcp.FIN && !tcp.PSH:
			st.syns++
		case tcp.FIN && tcp.ACK && !tcp.SYN && !tcp.PSH:
			st.fins++
		case tcp.ACK && !tcp.PSH && !tcp.SYN && !tcp.FIN:
			st.bareAcks++
		case tcp.PSH && tcp.ACK && !tcp.SYN && !tcp.FIN:
			st.segments++
			st.maxPayload = max(st.maxPayload, len(tcp.Payload))
		default:
			return nil, fmt.Errorf("record %d: flags %v", n, tcpFlags(tcp))
		}
		if (tcp.SYN || tcp.FIN || !tcp.PSH) && len(tcp.Payload) != 0 {
			return nil, fmt.Errorf("record %d: %s segment with %d bytes", n, tcpFlags(tcp), len(tcp.Payload))
		}
		var src, dst netip.AddrPort
		switch ip := p.NetworkLayer().(type) {
		case *layers.IPv4:
			if int(ip.Length) != len(pkt)-14 {
				return nil, fmt.Errorf("record %d: IPv4 length %d, packet %d", n, ip.Length, len(pkt)-14)
			}
			if sum := ipv4Checksum(pkt[14 : 14+20]); sum != 0 {
				return nil, fmt.Errorf("record %d: bad IPv4 header checksum", n)
			}
			s, _ := netip.AddrFromSlice(ip.SrcIP)
			d, _ := netip.AddrFromSlice(ip.DstIP)
			src, dst = netip.AddrPortFrom(s, uint16(tcp.SrcPort)), netip.AddrPortFrom(d, uint16(tcp.DstPort))
			_ = tcp.SetNetworkLayerForChecksum(ip)
		case *layers.IPv6:
			if int(ip.Length) != len(pkt)-14-40 {
				return nil, fmt.Errorf("record %d: IPv6 length %d, packet %d", n, ip.Length, len(pkt)-54)
			}
			s, _ := netip.AddrFromSlice(ip.SrcIP)
			d, _ := netip.AddrFromSlice(ip.DstIP)
			src, dst = netip.AddrPortFrom(s, uint16(tcp.SrcPort)), netip.AddrPortFrom(d, uint16(tcp.DstPort))
			_ = tcp.SetNetworkLayerForChecksum(ip)
		default:
			return nil, fmt.Errorf("record %d: no IP layer", n)
		}
		// Summed over a segment that includes its checksum, a valid
		// checksum folds to zero.
		if sum, err := tcp.ComputeChecksum(); err != nil || sum != 0 {
			return nil, fmt.Errorf("record %d: bad TCP checksum %#x (residue %#x, %v)", n, tcp.Checksum, sum, err)
		}
		eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if eth.SrcMAC[0] != 0x02 || eth.DstMAC[0] != 0x02 {
			return nil, fmt.Errorf("record %d: MACs not locally administered", n)
		}

		key := [2]netip.AddrPort{src, dst}
		rev := [2]netip.AddrPort{dst, src}
		canon := key
		if _, ok := clientOf[rev]; ok {
			canon = rev
		}
		newDir := func() *dirState {
			d := &dirState{pending: map[uint32]*message{}, opened: map[uint32]bool{}}
			d.fr = http2.NewFramer(io.Discard, &d.in)
			return d
		}
		if tcp.SYN && !tcp.ACK {
			// A new connection on this pair of addresses: forget the old.
			if d := dirs[key]; d != nil && !d.finSeen {
				return nil, fmt.Errorf("record %d: SYN on %v, whose connection was not closed", n, key)
			}
			dirs[key], dirs[rev] = newDir(), nil
			delete(clientOf, canon)
			delete(clientOf, rev)
			canon = key
		}
		if tcp.SYN && tcp.ACK {
			if o := dirs[rev]; o == nil || !o.synSeen {
				return nil, fmt.Errorf("record %d: SYN-ACK without a SYN", n)
			}
			dirs[key] = newDir()
		}
		d := dirs[key]
		if d == nil {
			d = newDir()
			dirs[key] = d
		}
		if d.finSeen && (len(tcp.Payload) > 0 || tcp.FIN) {
			return nil, fmt.Errorf("record %d: data or FIN after FIN on %v", n, key)
		}
		payload := tcp.Payload
		if d.seqKnown && tcp.Seq != d.nextSeq {
			return nil, fmt.Errorf("record %d: seq %d, want %d", n, tcp.Seq, d.nextSeq)
		}
		d.seqKnown, d.nextSeq = true, tcp.Seq+uint32(len(payload))
		if tcp.SYN || tcp.FIN {
			d.nextSeq++
			d.synSeen = d.synSeen || tcp.SYN
			d.finSeen = d.finSeen || tcp.FIN
		}
		if o := dirs[rev]; tcp.ACK && o != nil && o.seqKnown && tcp.Ack != o.nextSeq {
			return nil, fmt.Errorf("record %d: ack %d, want %d", n, tcp.Ack, o.nextSeq)
		}
		if len(payload) == 0 {
			continue
		}
		d.raw = append(d.raw, payload...)
		if _, ok := clientOf[canon]; !ok {
			if _, ok := clientOf[rev]; ok {
				canon = rev
			}
		}
		if _, ok := clientOf[canon]; !ok {
			if !bytes.HasPrefix(d.raw, []byte(h2Preface)) {
				return nil, fmt.Errorf("record %d: new flow %v does not start with the client preface", n, key)
			}
			clientOf[canon] = src
		}
		client := clientOf[canon]
		fromClient := src == client
		if fromClient && !d.preface {
			d.raw = d.raw[len(h2Preface):]
			d.preface = true
		}
		server := dst
		if !fromClient {
			server = src
		}
		cd := dirs[[2]netip.AddrPort{client, server}] // the client direction
		for len(d.raw) >= 9 {
			flen := int(d.raw[0])<<16 | int(d.raw[1])<<8 | int(d.raw[2])
			if len(d.raw) < 9+flen {
				break
			}
			d.in.Write(d.raw[:9+flen])
			d.raw = d.raw[9+flen:]
			f, err := d.fr.ReadFrame()
			if err != nil {
				return nil, fmt.Errorf("record %d: frame: %w", n, err)
			}
			finish := func(sid uint32) {
				m := d.pending[sid]
				delete(d.pending, sid)
				m.ts = ci.Timestamp.UnixNano()
				out = append(out, *m)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame, *http2.WindowUpdateFrame:
				if f.Header().StreamID != 0 {
					return nil, fmt.Errorf("record %d: connection frame on stream %d", n, f.Header().StreamID)
				}
			case *http2.HeadersFrame:
				d.block = append(d.block[:0], f.HeaderBlockFragment()...)
				d.blockSID, d.endOnHdrs = f.StreamID, f.StreamEnded()
				if fromClient && d.pending[f.StreamID] == nil {
					if f.StreamID&1 == 0 || f.StreamID <= cd.lastStream {
						return nil, fmt.Errorf("record %d: client opens stream %d after %d", n, f.StreamID, cd.lastStream)
					}
					cd.lastStream = f.StreamID
					cd.opened[f.StreamID] = true
				}
				if f.HeadersEnded() {
					if err := d.endBlock(client, server, fromClient); err != nil {
						return nil, fmt.Errorf("record %d: %w", n, err)
					}
					if !fromClient && !cd.opened[f.StreamID] {
						d.pending[f.StreamID].unpaired = true
					}
					if d.endOnHdrs {
						finish(f.StreamID)
					}
				}
			case *http2.ContinuationFrame:
				d.block = append(d.block, f.HeaderBlockFragment()...)
				if f.HeadersEnded() {
					if err := d.endBlock(client, server, fromClient); err != nil {
						return nil, fmt.Errorf("record %d: %w", n, err)
					}
					if d.endOnHdrs {
						finish(f.StreamID)
					}
				}
			case *http2.DataFrame:
				m := d.pending[f.StreamID]
				if m == nil {
					return nil, fmt.Errorf("record %d: DATA on stream %d without HEADERS", n, f.StreamID)
				}
				m.body = append(m.body, f.Data()...)
				if f.StreamEnded() {
					finish(f.StreamID)
				}
			default:
				return nil, fmt.Errorf("record %d: unexpected frame %v", n, f.Header())
			}
		}
	}
}

func (d *dirState) endBlock(client, server netip.AddrPort, fromClient bool) error {
	// A fresh decoder per block: the stream must not depend on HPACK state.
	fields, err := hpack.NewDecoder(4096, nil).DecodeFull(d.block)
	if err != nil {
		return fmt.Errorf("stream %d: hpack: %w", d.blockSID, err)
	}
	regular := false
	for _, f := range fields {
		if hasUpper(f.Name) {
			return fmt.Errorf("stream %d: uppercase field name %q", d.blockSID, f.Name)
		}
		if f.IsPseudo() && regular {
			return fmt.Errorf("stream %d: pseudo-header %q after regular fields", d.blockSID, f.Name)
		}
		regular = regular || !f.IsPseudo()
	}
	if d.pending[d.blockSID] != nil {
		return fmt.Errorf("stream %d: HEADERS while a message is open", d.blockSID)
	}
	d.pending[d.blockSID] = &message{client: client, server: server, fromClient: fromClient, streamID: d.blockSID, fields: fields}
	return nil
}

func tcpFlags(t *layers.TCP) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{t.SYN, "SYN"}, {t.FIN, "FIN"}, {t.PSH, "PSH"}, {t.ACK, "ACK"}, {t.RST, "RST"}, {t.URG, "URG"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, "|")
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// wantFields is the header list a copy should produce: pseudo-headers first,
// names lowercased, the stream-id annotation and connection headers dropped.
func wantFields(c *nfcopy.Copy) []hpack.HeaderField {
	var pseudo, regular []hpack.HeaderField
	for _, h := range c.Headers {
		name := asciiLower(h.Name)
		switch name {
		case "x-http2-stream-id", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			continue
		}
		for _, v := range h.Values {
			if strings.HasPrefix(name, ":") {
				pseudo = append(pseudo, hpack.HeaderField{Name: name, Value: v})
			} else {
				regular = append(regular, hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	return append(pseudo, regular...)
}

// checkMessages compares decoded messages with the copies, in order.
func checkMessages(t *testing.T, copies []*nfcopy.Copy, msgs []message) {
	t.Helper()
	if len(msgs) != len(copies) {
		t.Fatalf("decoded %d messages, want %d", len(msgs), len(copies))
	}
	for i, c := range copies {
		m := msgs[i]
		want := wantFields(c)
		if fmt.Sprint(m.fields) != fmt.Sprint(want) {
			t.Errorf("copy %d: fields\n got %v\nwant %v", i, m.fields, want)
		}
		if !bytes.Equal(m.body, c.Body) {
			t.Errorf("copy %d: body %d bytes %.40q, want %d bytes %.40q", i, len(m.body), m.body, len(c.Body), c.Body)
		}
		if m.ts != c.Timestamp {
			t.Errorf("copy %d: timestamp %d, want %d", i, m.ts, c.Timestamp)
		}
		if m.fromClient != c.Direction.IsRequest() {
			t.Errorf("copy %d: fromClient %v for %v", i, m.fromClient, c.Direction)
		}
		if m.streamID%2 != 1 {
			t.Errorf("copy %d: stream id %d is not client-initiated", i, m.streamID)
		}
		// A response goes on the stream (and flow) of its request.
		if !c.Direction.IsRequest() && c.CorrelationID != "" {
			for j := i - 1; j >= 0; j-- {
				if r := copies[j]; r.Direction.IsRequest() && r.PairKey() == c.PairKey() {
					if m.streamID != msgs[j].streamID || m.client != msgs[j].client || m.server != msgs[j].server || m.unpaired {
						t.Errorf("copy %d: response on %v→%v stream %d (unpaired %v); its request (copy %d) on %v→%v stream %d",
							i, m.client, m.server, m.streamID, m.unpaired, j, msgs[j].client, msgs[j].server, msgs[j].streamID)
					}
					break
				}
			}
		}
	}
}

func headerValue(c *nfcopy.Copy, name string) string {
	for _, h := range c.Headers {
		if strings.EqualFold(h.Name, name) && len(h.Values) > 0 {
			return h.Values[0]
		}
	}
	return ""
}
