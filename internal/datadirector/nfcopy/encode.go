package nfcopy

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends c as a canonical record (the format Decode reads) to dst:
// a Diameter copy with its message as diameter-message (base64).
// Field order is fixed; empty optional metadata fields and zero ports are
// omitted; the timestamp is written as a string of nanoseconds; an empty
// Version is written as "1.0.0".
func AppendJSON(dst []byte, c *Copy) []byte {
	v := c.Version
	if v == "" {
		v = "1.0.0"
	}
	dst = append(dst, `{"version":`...)
	dst = appendString(dst, v)
	dst = append(dst, `,"metadata-list":{`...)
	first := true
	field := func(name, val string) {
		if val == "" {
			return
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
		dst = appendString(dst, val)
	}
	field("correlation-id", c.CorrelationID)
	field("producer-id", c.ProducerID)
	field("producer-fqdn", c.ProducerFQDN)
	field("consumer-id", c.ConsumerID)
	field("consumer-fqdn", c.ConsumerFQDN)
	field("hop-by-hop-id", c.HopByHopID)
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `"timestamp":"`...)
	dst = strconv.AppendInt(dst, c.Timestamp, 10)
	dst = append(dst, `","message-direction":`...)
	dst = appendString(dst, c.Direction.String())
	dst = append(dst, `,"feed-source":{"nf-type":`...)
	dst = appendString(dst, c.NFType)
	first = false
	field("nf-fqdn", c.NFFQDN)
	field("nf-instance-id", c.NFInstanceID)
	field("pod-instance-id", c.PodInstanceID)
	dst = append(dst, '}')
	field("source-ip", c.SourceIP)
	field("destination-ip", c.DestIP)
	if c.SourcePort != 0 {
		dst = append(dst, `,"source-port":`...)
		dst = strconv.AppendUint(dst, uint64(c.SourcePort), 10)
	}
	if c.DestPort != 0 {
		dst = append(dst, `,"destination-port":`...)
		dst = strconv.AppendUint(dst, uint64(c.DestPort), 10)
	}
	if c.Protocol == DiameterProtocol {
		dst = append(dst, '}')
		dst = appendDiameterMessage(dst, c.Body)
		return append(dst, '}')
	}
	dst = append(dst, `},"header-list":{`...)
	for i, h := range c.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, h.Name)
		dst = append(dst, `:[`...)
		for j, val := range h.Values {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, val)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"5g-sbi-message":`...)
	dst = appendBytesString(dst, c.Body)
	return append(dst, '}')
}

// AppendString appends s as a JSON string literal (quoted, escaped; invalid
// UTF-8 becomes U+FFFD). Exported for sinks building JSON around copies.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

func appendBytesString(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

func appendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time (hasSpecial): a body is mostly
		// plain, and a byte-wise scan was nfsim's top cost after snappy.
		for i+8 <= len(s) && !hasSpecial(load64(s[i:i+8])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		ch := s[i]
		if !special[ch] {
			i++
			continue
		}
		if ch >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch ch {
		case '"', '\\':
			dst = append(dst, '\\', ch)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xf])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// load64 reads 8 bytes of a string or byte slice little-endian, as
// binary.LittleEndian.Uint64 does for a slice.
func load64[S ~string | ~[]byte](b S) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
