package xdr

import (
	"bytes"
	"strings"
	"unsafe"
)

// SplitPath splits an SBI :path, "/{service}/{version}/{resource}?{query}",
// into its service name (nudm-ueau), API version (v1) and resource (the rest
// after the version, without the leading slash or the query). A path whose
// second segment is not a version (v1, v2, ...) gives version "" and the rest
// after the service as resource. Parts alias p.
func SplitPath(p string) (service, version, resource string) {
	if q := strings.IndexByte(p, '?'); q >= 0 {
		p = p[:q]
	}
	if len(p) < 2 || p[0] != '/' {
		return "", "", ""
	}
	p = p[1:]
	i := strings.IndexByte(p, '/')
	if i < 0 {
		return p, "", ""
	}
	service, p = p[:i], p[i+1:]
	j := strings.IndexByte(p, '/')
	seg := p
	if j >= 0 {
		seg = p[:j]
	}
	if isVersion(seg) {
		if j < 0 {
			return service, seg, ""
		}
		return service, seg, p[j+1:]
	}
	return service, "", p
}

func isVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// IdentityKind is a set of subscriber identities to look for.
type IdentityKind uint8

const (
	IDSUPI   IdentityKind = 1 << iota // imsi-<digits>
	IDSUCI                            // suci-...
	IDGPSI                            // msisdn-<digits>
	IDPEI                             // imei-<digits> or imeisv-<digits>
	IDDNN                             // "dnn":"..." in a body, dnn=... in a query
	IDSNSSAI                          // the first {"sst":n,"sd":"..."} in a body → "n" or "n-sd"
	IDAll    = IDSUPI | IDSUCI | IDGPSI | IDPEI | IDDNN | IDSNSSAI
)

// Identities are the subscriber identities found in a message. SUPI, GPSI and
// PEI keep their prefix (imsi-, msisdn-, imei-/imeisv-).
type Identities struct {
	SUPI, SUCI, GPSI, PEI, DNN, SNSSAI string

	buf []byte // backs a composed SNSSAI; reused
}

// Reset empties ids, keeping its buffer.
func (ids *Identities) Reset() { *ids = Identities{buf: ids.buf[:0]} }

// Find looks for the identities in want that ids does not hold yet, first in
// the path then in the body, by plain byte scanning (no JSON parse), and
// reports which it found. Found strings alias path and body (SNSSAI may alias
// ids' own buffer): they are valid while those are, and until the next Find
// or Reset on ids; clone them to keep them.
func (ids *Identities) Find(want IdentityKind, path string, body []byte) IdentityKind {
	var found IdentityKind
	pb := unsafe.Slice(unsafe.StringData(path), len(path))
	for _, src := range [2][]byte{pb, body} {
		if len(src) == 0 {
			continue
		}
		if want&IDSUPI != 0 && ids.SUPI == "" {
			if v := prefixed(src, "imsi-", digit, 5, 15); v != "" {
				ids.SUPI = v
				found |= IDSUPI
			}
		}
		if want&IDSUCI != 0 && ids.SUCI == "" {
			if v := prefixed(src, "suci-", suciChar, 1, 200); v != "" {
				ids.SUCI = v
				found |= IDSUCI
			}
		}
		if want&IDGPSI != 0 && ids.GPSI == "" {
			if v := prefixed(src, "msisdn-", digit, 5, 15); v != "" {
				ids.GPSI = v
				found |= IDGPSI
			}
		}
		if want&IDPEI != 0 && ids.PEI == "" {
			v := prefixed(src, "imeisv-", digit, 14, 16)
			if v == "" {
				v = prefixed(src, "imei-", digit, 14, 15)
			}
			if v != "" {
				ids.PEI = v
				found |= IDPEI
			}
		}
	}
	if want&IDDNN != 0 && ids.DNN == "" {
		v := jsonString(body, `"dnn"`)
		if v == "" {
			v = queryParam(path, "dnn")
		}
		if v != "" {
			ids.DNN = v
			found |= IDDNN
		}
	}
	if want&IDSNSSAI != 0 && ids.SNSSAI == "" {
		if v := ids.snssai(body); v != "" {
			ids.SNSSAI = v
			found |= IDSNSSAI
		}
	}
	return found
}

func digit(c byte) bool    { return c >= '0' && c <= '9' }
func alnum(c byte) bool    { return digit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' }
func suciChar(c byte) bool { return alnum(c) || c == '-' }

// prefixed finds the first prefix+value where the prefix starts a token (not
// preceded by a letter or digit) and the value is min..max bytes of ok
// characters not followed by another ok character.
func prefixed(src []byte, prefix string, ok func(byte) bool, min, max int) string {
	for off := 0; off < len(src); {
		i := bytes.Index(src[off:], unsafe.Slice(unsafe.StringData(prefix), len(prefix)))
		if i < 0 {
			return ""
		}
		i += off
		off = i + len(prefix)
		if i > 0 && alnum(src[i-1]) {
			continue
		}
		j := off
		for j < len(src) && j-off <= max && ok(src[j]) {
			j++
		}
		if n := j - off; n >= min && n <= max {
			return unsafe.String(&src[i], j-i)
		}
	}
	return ""
}

// jsonString returns the string value of the first member named key (quoted)
// in a JSON text, or "" when absent, empty, escaped or not a string.
func jsonString(src []byte, key string) string {
	k := unsafe.Slice(unsafe.StringData(key), len(key))
	for off := 0; off < len(src); {
		i := bytes.Index(src[off:], k)
		if i < 0 {
			return ""
		}
		j := skipWS(src, off+i+len(k))
		off += i + len(k)
		if j >= len(src) || src[j] != ':' {
			continue
		}
		j = skipWS(src, j+1)
		if j >= len(src) || src[j] != '"' {
			continue
		}
		j++
		e := bytes.IndexByte(src[j:], '"')
		if e <= 0 || bytes.IndexByte(src[j:j+e], '\\') >= 0 {
			continue
		}
		return unsafe.String(&src[j], e)
	}
	return ""
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// queryParam returns the raw (still URL-encoded) value of name in p's query.
func queryParam(p, name string) string {
	q := strings.IndexByte(p, '?')
	if q < 0 {
		return ""
	}
	for rest := p[q+1:]; rest != ""; {
		kv := rest
		if a := strings.IndexByte(rest, '&'); a >= 0 {
			kv, rest = rest[:a], rest[a+1:]
		} else {
			rest = ""
		}
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return kv[len(name)+1:]
		}
	}
	return ""
}

// snssai formats the first S-NSSAI object in body ({"sst":1,"sd":"000001"},
// members in any order) as "1-000001", or "1" without an sd.
func (ids *Identities) snssai(body []byte) string {
	for off := 0; off < len(body); {
		i := bytes.Index(body[off:], []byte(`"sst"`))
		if i < 0 {
			return ""
		}
		i += off
		off = i + 5
		j := skipWS(body, off)
		if j >= len(body) || body[j] != ':' {
			continue
		}
		j = skipWS(body, j+1)
		d := j
		for j < len(body) && digit(body[j]) && j-d < 3 {
			j++
		}
		if j == d {
			continue
		}
		sst := body[d:j]
		// The enclosing object: back to its '{', forward to its '}'.
		start := bytes.LastIndexByte(body[:i], '{')
		end := bytes.IndexByte(body[j:], '}')
		sd := ""
		if start >= 0 && end >= 0 {
			sd = jsonString(body[start:j+end], `"sd"`)
		}
		if sd == "" {
			return unsafe.String(&body[d], len(sst))
		}
		ids.buf = append(append(append(ids.buf[:0], sst...), '-'), sd...)
		return unsafe.String(&ids.buf[0], len(ids.buf))
	}
	return ""
}
