// Package copy is the NF message-copy model: the JSON record a 5G network
// function writes for every SBI message it handles, and its codecs.
package nfcopy

import (
	"hash/maphash"
	"strings"
)

// Direction is the trigger point at which the NF copied the message.
type Direction uint8

const (
	DirUnknown Direction = iota
	RequestIngress
	RequestEgress
	ResponseIngress
	ResponseEgress
)

var dirNames = [...]string{"", "REQUEST_INGRESS", "REQUEST_EGRESS", "RESPONSE_INGRESS", "RESPONSE_EGRESS"}

func (d Direction) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return ""
}

// IsRequest reports whether the copy is of a request (else a response).
func (d Direction) IsRequest() bool { return d == RequestIngress || d == RequestEgress }

// ParseDirection maps the wire name to a Direction (DirUnknown if unknown).
func ParseDirection(s string) Direction {
	for i, n := range dirNames {
		if i > 0 && n == s {
			return Direction(i)
		}
	}
	return DirUnknown
}

// Header is one HTTP/2 header field (pseudo-headers included) with its values,
// in the order the record lists them.
type Header struct {
	Name   string
	Values []string
}

// Copy is one decoded message copy. Strings and Body may alias the buffer the
// copy was decoded from (see Decode); a Copy must not outlive that buffer
// unless Clone'd.
type Copy struct {
	Version       string
	CorrelationID string
	ProducerID    string
	ProducerFQDN  string
	ConsumerID    string
	ConsumerFQDN  string
	HopByHopID    string
	Timestamp     int64 // ns since the epoch
	Direction     Direction
	NFType        string
	NFFQDN        string
	NFInstanceID  string
	PodInstanceID string
	SourceIP      string
	DestIP        string
	SourcePort    uint16
	DestPort      uint16
	Headers       []Header
	Body          []byte // the 5g-sbi-message, unescaped; a Diameter copy's message
	Protocol      Protocol
	Diameter      Diameter // what a Diameter copy's message says (Protocol DiameterProtocol)
	Raw           []byte   // the whole record as received

	scratch []byte // unescaped strings of the last Decode; reused
}

// Header returns the first value of the named header (case-insensitive), or
// "" when absent.
func (c *Copy) Header(name string) string {
	for i := range c.Headers {
		h := &c.Headers[i]
		if len(h.Name) == len(name) && strings.EqualFold(h.Name, name) {
			if len(h.Values) > 0 {
				return h.Values[0]
			}
			return ""
		}
	}
	return ""
}

// StreamID returns the HTTP/2 stream id carried in x-http2-stream-id, or 0
// when absent or not a valid uint32.
func (c *Copy) StreamID() uint32 {
	v := c.Header("x-http2-stream-id")
	if v == "" || len(v) > 10 {
		return 0
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		d := v[i] - '0'
		if d > 9 {
			return 0
		}
		n = n*10 + uint64(d)
	}
	if n > 1<<32-1 {
		return 0
	}
	return uint32(n)
}

// Clone returns a deep copy that owns all its memory, so it may outlive the
// buffer the original was decoded from (and later Decode calls on it). All
// strings share one allocation.
func (c *Copy) Clone() *Copy {
	n := len(c.Version) + len(c.CorrelationID) + len(c.ProducerID) + len(c.ProducerFQDN) +
		len(c.ConsumerID) + len(c.ConsumerFQDN) + len(c.HopByHopID) + len(c.NFType) +
		len(c.NFFQDN) + len(c.NFInstanceID) + len(c.PodInstanceID) + len(c.SourceIP) + len(c.DestIP)
	nv := 0
	for _, h := range c.Headers {
		n += len(h.Name)
		for _, v := range h.Values {
			n += len(v)
		}
		nv += len(h.Values)
	}
	var sb strings.Builder
	sb.Grow(n)
	// Offsets into the one string built below.
	add := func(s string) [2]int {
		start := sb.Len()
		sb.WriteString(s)
		return [2]int{start, sb.Len()}
	}
	type span = [2]int
	fields := []*string{&c.Version, &c.CorrelationID, &c.ProducerID, &c.ProducerFQDN,
		&c.ConsumerID, &c.ConsumerFQDN, &c.HopByHopID, &c.NFType, &c.NFFQDN,
		&c.NFInstanceID, &c.PodInstanceID, &c.SourceIP, &c.DestIP}
	spans := make([]span, 0, len(fields)+len(c.Headers)+nv)
	for _, f := range fields {
		spans = append(spans, add(*f))
	}
	for _, h := range c.Headers {
		spans = append(spans, add(h.Name))
		for _, v := range h.Values {
			spans = append(spans, add(v))
		}
	}
	all := sb.String()
	cut := func(i int) string { return all[spans[i][0]:spans[i][1]] }

	d := &Copy{Timestamp: c.Timestamp, Direction: c.Direction, SourcePort: c.SourcePort, DestPort: c.DestPort,
		Protocol: c.Protocol, Diameter: c.Diameter} // Diameter's strings are its own
	dst := []*string{&d.Version, &d.CorrelationID, &d.ProducerID, &d.ProducerFQDN,
		&d.ConsumerID, &d.ConsumerFQDN, &d.HopByHopID, &d.NFType, &d.NFFQDN,
		&d.NFInstanceID, &d.PodInstanceID, &d.SourceIP, &d.DestIP}
	k := 0
	for _, f := range dst {
		*f = cut(k)
		k++
	}
	if len(c.Headers) > 0 {
		d.Headers = make([]Header, len(c.Headers))
		vals := make([]string, nv)
		for i, h := range c.Headers {
			d.Headers[i].Name = cut(k)
			k++
			vs := vals[:len(h.Values):len(h.Values)]
			vals = vals[len(h.Values):]
			for j := range h.Values {
				vs[j] = cut(k)
				k++
			}
			d.Headers[i].Values = vs
		}
	}
	if c.Body != nil {
		d.Body = append([]byte(nil), c.Body...)
	}
	if c.Raw != nil {
		d.Raw = append([]byte(nil), c.Raw...)
	}
	return d
}

// PairKey identifies the request/response pair a copy belongs to at its
// copying NF: the correlation id, the hop-by-hop id (an SCP retry takes a
// new one), the leg (an NF's ingress copies pair with each other, and its
// egress copies) and the NF. 0 when the copy has no correlation id. Keys
// are equal within one process only (they are for in-memory tables).
func (c *Copy) PairKey() uint64 {
	if c.CorrelationID == "" {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(pairSeed)
	for _, s := range [...]string{c.CorrelationID, c.HopByHopID, c.NFInstanceID, c.NFFQDN} {
		h.WriteString(s)
		h.WriteByte(0) // a separator, so "ab"+"c" differs from "a"+"bc"
	}
	if c.Direction == RequestEgress || c.Direction == ResponseIngress {
		h.WriteByte(1)
	}
	return h.Sum64() | 1 // never 0
}

// pairSeed is set once, before any key is made.
var pairSeed = maphash.MakeSeed()
