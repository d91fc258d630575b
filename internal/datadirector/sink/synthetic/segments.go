package synthetic

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
)

// TCP flags of the segments appendSegments writes.
const (
	tcpFIN    = 0x01
	tcpSYN    = 0x02
	tcpPSH    = 0x08
	tcpACK    = 0x10
	tcpPSHACK = tcpPSH | tcpACK
)

// appendSegments appends payload as TCP segments (records) of the flow of at
// most the MSS each, client→server when fromClient, advancing that
// direction's sequence; flags are the segments' (PSH|ACK for data; a SYN or
// FIN with no payload counts one sequence number). Each record is written
// in place: pcap record header, Ethernet, IPv4 or IPv6 and TCP headers (no
// options), the payload, then the checksums over what is already in dst.
// When the receiving side has more than ackEvery unacknowledged, it sends a
// bare ACK first.
func (e *Encoder) appendSegments(dst []byte, ts int64, key flowKey, fl *flowState, fromClient bool, payload []byte, flags byte) []byte {
	if ts < 0 {
		ts = 0
	}
	for first := true; first || len(payload) > 0; first = false {
		seq, peerAck := fl.clientSeq, fl.serverAck
		if !fromClient {
			seq, peerAck = fl.serverSeq, fl.clientAck
		}
		if len(payload) > 0 && seq-peerAck >= ackEvery {
			dst = e.appendSegment(dst, ts, key, fl, !fromClient, nil, tcpACK, noSum)
		}
		n := min(len(payload), e.mss)
		dst = e.appendSegment(dst, ts, key, fl, fromClient, payload[:n], flags, noSum)
		payload = payload[n:]
	}
	return dst
}

// appendShared is appendSegments for a copy's shared encoding: its frames
// are on stream 0 and the sums of its MSS-sized pieces are known, so each
// segment's checksum reads only its TCP header, plus what writing sid into
// the frame headers of the piece adds; sid is written into dst's copy.
func (e *Encoder) appendShared(dst []byte, ts int64, key flowKey, fl *flowState, fromClient bool, p *precoded, sid uint32) []byte {
	var sb [4]byte
	binary.BigEndian.PutUint32(sb[:], sid&0x7fffffff)
	payload := p.payload
	next := 0 // the frame header the next piece starts visiting from
	for i, at := 0, 0; at < len(payload); i, at = i+1, at+e.mss {
		seq, peerAck := fl.clientSeq, fl.serverAck
		if !fromClient {
			seq, peerAck = fl.serverSeq, fl.clientAck
		}
		if seq-peerAck >= ackEvery {
			dst = e.appendSegment(dst, ts, key, fl, !fromClient, nil, tcpACK, noSum)
		}
		end := min(len(payload), at+e.mss)
		sum := p.sums[i]
		resume := visitStreamIDs(payload, at, end, next, func(q, b int) {
			if (q-at)%2 == 0 { // a word's high byte
				sum += uint64(sb[b]) << 8
			} else {
				sum += uint64(sb[b])
			}
		})
		dst = e.appendSegment(dst, ts, key, fl, fromClient, payload[at:end], tcpPSHACK, sum)
		piece := dst[len(dst)-(end-at):]
		visitStreamIDs(payload, at, end, next, func(q, b int) { piece[q-at] = sb[b] })
		next = resume
	}
	return dst
}

// visitStreamIDs calls f(q, b) for byte b (0-3) of each frame header's
// stream id that lies at offset q in [at, end) of the frames p, from the
// header at next on, and returns the header the next piece resumes from (one
// reaching past end is visited again there).
func visitStreamIDs(p []byte, at, end, next int, f func(q, b int)) int {
	for next < end {
		for b := 0; b < 4; b++ {
			if q := next + 5 + b; q >= at && q < end {
				f(q, b)
			}
		}
		if next+h2FrameHeaderLen > end {
			return next
		}
		next += h2FrameHeaderLen + (int(p[next])<<16 | int(p[next+1])<<8 | int(p[next+2]))
	}
	return next
}

// noSum tells appendSegment that the payload's sum is not known.
const noSum = ^uint64(0)

// appendSegment appends one segment and advances the flow's state. psum,
// unless it is noSum, is the payload's one's-complement sum (onesSum, as
// the segment will carry it), so the checksum reads only the TCP header.
func (e *Encoder) appendSegment(dst []byte, ts int64, key flowKey, fl *flowState, fromClient bool, payload []byte, flags byte, psum uint64) []byte {
	src, dstAP := key.server, key.client
	seq, ack := &fl.serverSeq, fl.clientSeq
	if fromClient {
		src, dstAP = key.client, key.server
		seq, ack = &fl.clientSeq, fl.serverSeq
	}
	if flags&tcpACK == 0 {
		ack = 0 // a SYN acknowledges nothing
	}
	v4 := src.Addr().Is4()
	ipLen := ipv6HeaderLen
	if v4 {
		ipLen = ipv4HeaderLen
	}
	srcMAC, dstMAC := macFor(src.Addr()), macFor(dstAP.Addr())
	n := len(payload)
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
	dst = append(dst, 5<<4, flags, 0xff, 0xff, 0, 0, 0, 0) // data offset 5, flags, window 65535, checksum, urgent
	dst = append(dst, payload...)
	if psum != noSum {
		binary.BigEndian.PutUint16(dst[tcp+16:], checksum(dst[tcp:tcp+tcpHeaderLen], pseudo+psum))
	} else {
		binary.BigEndian.PutUint16(dst[tcp+16:], checksum(dst[tcp:], pseudo))
	}
	*seq += uint32(n)
	e.seqClock += uint32(n)
	if flags&(tcpSYN|tcpFIN) != 0 {
		*seq++
		e.seqClock++
	}
	if fromClient {
		fl.clientAck = ack
	} else {
		fl.serverAck = ack
	}
	return dst
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
