package synthetic

import (
	"net/netip"
	"strconv"
	"strings"
	"unique"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Shared makes, once per copy, the part of a copy's records that does not
// depend on the connection a feed writes to: the copy's HTTP/2 frames (but
// for their stream id) and its flow's addresses. The director hands one
// decoded copy to every feed of a stream (its shared reader); when several of
// them are synthetic feeds of one key (the same address mappings), it has
// the copies encoded this way once, and each feed's encoder adds only what
// its own connection decides: the opening of a flow it has not seen, the
// stream id, the sequence numbers, the headers below HTTP/2 and the
// checksums. The shared part is most of a sink's encoding.
//
// A sink is given the Shared beside the batch (Sink.WriteShared) and finds
// each copy's encoding in it; Reset forgets them, which the caller does once
// no sink is writing those copies.
type Shared struct {
	enc   *Encoder
	buf   []byte // every copy's frames, end to end
	pre   []precoded
	sums  []uint64               // every copy's pieces' sums, end to end
	ends  []int                  // end of each precoded's frames in buf
	which []int                  // index in the copies of each precoded
	at    map[*nfcopy.Copy]int32 // a copy's precoded
}

// precoded is one copy's shared encoding.
type precoded struct {
	key            shareKey
	client, server netip.AddrPort
	request        bool
	ownStream      uint32   // the NF's x-http2-stream-id, 0 if none
	pair           uint64   // the copy's PairKey
	payload        []byte   // its HTTP/2 frames, on stream 0
	sums           []uint64 // onesSum of each MSS-sized piece of payload
}

// NewShared returns a Shared for the encoders of s's key.
func (s *Sink) NewShared() *Shared { return newShared(s.cfg.encoderOptions()) }

// ShareKey is equal for sinks whose encoders share encodings (Shared);
// nil for a sink whose encoder shares none (its client ports its own).
func (s *Sink) ShareKey() any {
	if !s.enc.shares {
		return nil
	}
	return s.enc.key
}

// newShared makes the Shared of the encoders of opts' key: what the key
// holds (mappings, ports, MSS) is all of opts that it uses.
func newShared(opts EncoderOptions) *Shared {
	opts.MaxFlows = 1
	return &Shared{enc: NewEncoder(opts), at: map[*nfcopy.Copy]int32{}}
}

// maxKeptShared bounds the frames buffer a Shared keeps between batches.
const maxKeptShared = 16 << 20

// Encode encodes the copies.
func (s *Shared) Encode(cs []*nfcopy.Copy) {
	s.buf, s.ends, s.which, s.sums = s.buf[:0], s.ends[:0], s.which[:0], s.sums[:0]
	if cap(s.pre) < len(cs) {
		s.pre = make([]precoded, 0, len(cs))
	}
	s.pre = s.pre[:0]
	e := s.enc
	for i, c := range cs {
		if c.Protocol == nfcopy.DiameterProtocol {
			continue // no frames to share: its message is its payload
		}
		ci := scanHeaders(c)
		client, server := e.endpoints(c, ci)
		start := len(s.buf)
		s.buf = e.appendFrames(s.buf, c, 0)
		for p := s.buf[start:]; len(p) > 0; p = p[min(len(p), e.mss):] {
			s.sums = append(s.sums, onesSum(p[:min(len(p), e.mss)], 0))
		}
		s.pre = append(s.pre, precoded{key: e.key, client: client, server: server, request: ci.request, ownStream: ci.streamID, pair: c.PairKey()})
		s.ends = append(s.ends, len(s.buf))
		s.which = append(s.which, i)
	}
	// The buffer has stopped growing: slice each copy's frames from it.
	start, sum := 0, 0
	for k := range s.pre {
		p := &s.pre[k]
		p.payload = s.buf[start:s.ends[k]:s.ends[k]]
		n := (len(p.payload) + e.mss - 1) / e.mss
		p.sums = s.sums[sum : sum+n : sum+n]
		start, sum = s.ends[k], sum+n
		s.at[cs[s.which[k]]] = int32(k)
	}
}

// encoding is c's shared encoding, nil if s (which may be nil) has none.
func (s *Shared) encoding(c *nfcopy.Copy) *precoded {
	if s == nil {
		return nil
	}
	if k, ok := s.at[c]; ok {
		return &s.pre[k]
	}
	return nil
}

// Reset forgets the last Encode's encodings, keeping the buffers.
func (s *Shared) Reset() {
	clear(s.at)
	clear(s.pre)
	s.pre = s.pre[:0]
	if cap(s.buf) > maxKeptShared {
		s.buf = nil
	}
	s.buf = s.buf[:0]
}

// shareKey identifies encoders that encode alike: their mappings, whether
// they keep ports, and their MSS, written out and interned (unique), so
// that comparing two is comparing pointers, and a key no encoder holds any
// more is reclaimed.
type shareKey = unique.Handle[string]

// internKey returns the one shareKey of maps (in order: a later mapping of
// the same name wins), keepPorts and mss.
func internKey(maps []Mapping, keepPorts bool, mss int) shareKey {
	var b strings.Builder
	if keepPorts {
		b.WriteString("keep-ports\n")
	}
	b.WriteString("mss ")
	b.WriteString(strconv.Itoa(mss))
	b.WriteByte('\n')
	for _, m := range maps {
		if !m.Addr.Addr().IsValid() {
			continue
		}
		b.WriteString(asciiLower(m.NFFQDN))
		b.WriteByte(0)
		b.WriteString(m.NFInstanceID)
		b.WriteByte(0)
		b.WriteString(m.Addr.String())
		b.WriteByte('\n')
	}
	return unique.Make(b.String())
}
