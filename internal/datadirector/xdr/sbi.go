package xdr

import (
	"bytes"
	"encoding/json"
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
	if want&(IDSUPI|IDSUCI|IDGPSI|IDPEI) != 0 {
		found |= ids.dashed(want, pb)
		found |= ids.dashed(want, body)
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

// dashed finds, in one pass over the dashes of src, the first valid
// imsi-, suci-, msisdn-, imei- and imeisv- tokens that want asks for and ids
// lacks. A token starts at a non-alphanumeric byte (or src's start); its value
// is a run of allowed characters of bounded length not followed by another.
func (ids *Identities) dashed(want IdentityKind, src []byte) IdentityKind {
	var found IdentityKind
	for off := 0; off < len(src); {
		i := bytes.IndexByte(src[off:], '-')
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		j := i
		for j > 0 && i-j <= 6 && alnum(src[j-1]) {
			j--
		}
		if j == i || j > 0 && alnum(src[j-1]) {
			continue
		}
		var dst *string
		var k IdentityKind
		ok, min, max := digit, 5, 15
		switch string(src[j:i]) {
		case "imsi":
			dst, k = &ids.SUPI, IDSUPI
		case "suci":
			dst, k, ok, min, max = &ids.SUCI, IDSUCI, suciChar, 1, 200
		case "msisdn":
			dst, k = &ids.GPSI, IDGPSI
		case "imei":
			dst, k, min, max = &ids.PEI, IDPEI, 14, 15
		case "imeisv":
			dst, k, min, max = &ids.PEI, IDPEI, 14, 16
		default:
			continue
		}
		if want&k == 0 || *dst != "" {
			continue
		}
		e := i + 1
		for e < len(src) && e-i-1 <= max && ok(src[e]) {
			e++
		}
		if n := e - i - 1; n >= min && n <= max {
			*dst = unsafe.String(&src[j], e-j)
			found |= k
			if want&(IDSUPI|IDSUCI|IDGPSI|IDPEI)&^found == 0 {
				break
			}
		}
	}
	return found
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

// ProblemCause returns the "cause" of a ProblemDetails body (TS 29.571
// §5.2.4.1): the top-level string member, as NFs answer failures with
// application/problem+json; "" when there is none.
func ProblemCause(body []byte) string {
	if len(body) == 0 || len(body) > 64<<10 {
		return ""
	}
	var pd struct {
		Cause string `json:"cause"`
	}
	if json.Unmarshal(body, &pd) != nil || len(pd.Cause) > 64 {
		return ""
	}
	return pd.Cause
}

// PLMNOf returns the PLMN of a 3GPP FQDN (TS 23.003 §28:
// <...>.5gc.mnc<MNC>.mcc<MCC>.3gppnetwork.org) as MCC-MNC with the MNC's
// digits as written less a leading pad zero of a 3-digit form ("234-30"
// for mnc030.mcc234); "" for any other name.
func PLMNOf(fqdn string) string {
	i := strings.Index(fqdn, ".mnc")
	if i < 0 {
		i = strings.Index(fqdn, "mnc")
		if i != 0 {
			return ""
		}
		i = -1
	}
	rest := fqdn[i+4:]
	mnc, rest, ok := strings.Cut(rest, ".mcc")
	if !ok || len(mnc) != 3 || len(rest) < 3 || !digits(mnc) || !digits(rest[:3]) {
		return ""
	}
	if len(rest) > 3 && rest[3] != '.' {
		return ""
	}
	if mnc[0] == '0' {
		mnc = mnc[1:]
	}
	return rest[:3] + "-" + mnc
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
