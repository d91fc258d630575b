package synthetic

// HPACK "literal header field without indexing" with plain (not Huffman)
// strings, RFC 7541 §6.2.2. Huffman coding saves about a fifth of the header
// bytes, but costs the sender an encode and every consumer (probe, Wireshark)
// a bit-by-bit decode per field; on a loopback or LAN feed the CPU is the
// scarcer resource. Names found in the static table are sent by index.

// staticNames maps the names of the HPACK static table (RFC 7541 Appendix A)
// to their first index.
var staticNames = func() map[string]uint64 {
	names := []string{":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status", ":status",
		":status", ":status", ":status", ":status", ":status", "accept-charset", "accept-encoding", "accept-language",
		"accept-ranges", "accept", "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
		"content-disposition", "content-encoding", "content-language", "content-length", "content-location",
		"content-range", "content-type", "cookie", "date", "etag", "expect", "expires", "from", "host", "if-match",
		"if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link", "location",
		"max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
		"server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent", "vary", "via",
		"www-authenticate"}
	m := make(map[string]uint64, len(names))
	for i, n := range names {
		if _, ok := m[n]; !ok {
			m[n] = uint64(i + 1)
		}
	}
	return m
}()

// appendHPACKInt appends v with an n-bit prefix whose high bits are first.
func appendHPACKInt(dst []byte, first byte, n uint, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(limit))
	v -= limit
	for v >= 128 {
		dst = append(dst, byte(v&0x7f)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// appendLiteralField appends one never-indexed-by-us field (name lowercase).
func appendLiteralField(dst []byte, name, value string) []byte {
	if idx, ok := staticNames[name]; ok {
		dst = appendHPACKInt(dst, 0x00, 4, idx)
	} else {
		dst = append(dst, 0x00)
		dst = appendHPACKInt(dst, 0x00, 7, uint64(len(name)))
		dst = append(dst, name...)
	}
	dst = appendHPACKInt(dst, 0x00, 7, uint64(len(value)))
	return append(dst, value...)
}
