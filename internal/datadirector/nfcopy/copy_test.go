package nfcopy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files")

// dump renders a decode result as stable text for golden files.
func dump(c *Copy, err error) string {
	var b strings.Builder
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			fmt.Fprintf(&b, "error field=%q reason=%s\n", de.Field, de.Reason)
		} else {
			fmt.Fprintf(&b, "error %v\n", err)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "version=%q\ncorrelation-id=%q\nproducer-id=%q producer-fqdn=%q\nconsumer-id=%q consumer-fqdn=%q\nhop-by-hop-id=%q\n",
		c.Version, c.CorrelationID, c.ProducerID, c.ProducerFQDN, c.ConsumerID, c.ConsumerFQDN, c.HopByHopID)
	fmt.Fprintf(&b, "timestamp=%d direction=%s\nnf-type=%q nf-fqdn=%q nf-instance-id=%q pod-instance-id=%q\n",
		c.Timestamp, c.Direction, c.NFType, c.NFFQDN, c.NFInstanceID, c.PodInstanceID)
	fmt.Fprintf(&b, "source=%q:%d destination=%q:%d stream-id=%d\n", c.SourceIP, c.SourcePort, c.DestIP, c.DestPort, c.StreamID())
	for _, h := range c.Headers {
		fmt.Fprintf(&b, "header %q %q\n", h.Name, h.Values)
	}
	fmt.Fprintf(&b, "body=%q\n", c.Body)
	return b.String()
}

func TestDecodeGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/records/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	var c Copy // reused across files on purpose: no state may leak between them
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			derr := Decode(raw, &c)
			got := dump(&c, derr)
			if bad := strings.HasPrefix(filepath.Base(f), "bad_"); bad != (derr != nil) {
				t.Errorf("bad_ file must fail and others succeed; got err=%v", derr)
			}
			// The oracle must agree on acceptance and on every field.
			oc, oerr := oracleDecode(raw)
			if outcome(oerr) != outcome(derr) {
				t.Errorf("oracle disagrees: oracle err=%v, Decode err=%v", oerr, derr)
			} else if outcome(derr) != "refused" {
				if diff := compare(oc, &c); diff != "" {
					t.Errorf("oracle field mismatch: %s", diff)
				}
			}
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("mismatch with %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in, field, reason string
	}{
		{"empty", ``, "", "syntax"},
		{"not object", `[]`, "", "syntax"},
		{"metadata not object", `{"metadata-list":5}`, "metadata-list", "bad_type"},
		{"nf-type number", `{"metadata-list":{"feed-source":{"nf-type":5}}}`, "metadata-list.feed-source.nf-type", "bad_type"},
		{"negative timestamp", `{"metadata-list":{"timestamp":-5}}`, "metadata-list.timestamp", "bad_timestamp"},
		{"huge timestamp", `{"metadata-list":{"timestamp":"99999999999999999999"}}`, "metadata-list.timestamp", "bad_timestamp"},
		{"timestamp in 1970", `{"metadata-list":{"timestamp":"1678705"}}`, "metadata-list.timestamp", "bad_timestamp"},
		{"timestamp between units", `{"metadata-list":{"timestamp":"50000000000000000"}}`, "metadata-list.timestamp", "bad_timestamp"},
		{"empty port", `{"metadata-list":{"source-port":""}}`, "metadata-list.source-port", "bad_port"},
		{"header value number", `{"header-list":{"a":[1]}}`, "header-list.a", "bad_type"},
		{"body object", `{"5g-sbi-message":{}}`, "5g-sbi-message", "bad_type"},
		{"bad escape", `{"version":"\x"}`, "version", "syntax"},
		{"control char", "{\"version\":\"a\x01\"}", "version", "syntax"},
		{"unclosed", `{"version":"1"`, "", "syntax"},
		{"too large", `{"version":"` + strings.Repeat("a", MaxRecordSize) + `"}`, "", "too_large"},
		{"deep", strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1), "a", "syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Copy
			err := Decode([]byte(tt.in), &c)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want DecodeError, got %v", err)
			}
			if de.Field != tt.field || de.Reason != tt.reason {
				t.Errorf("got field=%q reason=%q, want %q %q", de.Field, de.Reason, tt.field, tt.reason)
			}
		})
	}
}

func TestHeaderStreamIDClone(t *testing.T) {
	raw, err := os.ReadFile("testdata/records/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	buf := append([]byte(nil), raw...)
	var c Copy
	if err := Decode(buf, &c); err != nil {
		t.Fatal(err)
	}
	if got := c.Header("Content-Type"); got != "application/json" {
		t.Errorf("Header case-insensitive: %q", got)
	}
	if got := c.Header("absent"); got != "" {
		t.Errorf("absent header: %q", got)
	}
	if got := c.StreamID(); got != 3 {
		t.Errorf("StreamID = %d", got)
	}
	cl := c.Clone()
	want := dump(&c, nil)
	for i := range buf { // the clone must not alias the input
		buf[i] = 'X'
	}
	if got := dump(cl, nil); got != want {
		t.Errorf("clone changed with its source:\n%s\nwant\n%s", got, want)
	}
}

func TestStreamIDInvalid(t *testing.T) {
	for _, v := range []string{"", "x", "-1", "4294967296", "12345678901"} {
		c := Copy{Headers: []Header{{Name: "x-http2-stream-id", Values: []string{v}}}}
		if got := c.StreamID(); got != 0 {
			t.Errorf("StreamID(%q) = %d, want 0", v, got)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/records/*.json")
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "bad_") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var a, b Copy
		if err := Decode(raw, &a); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		enc := AppendJSON(nil, &a)
		if !json.Valid(enc) {
			t.Fatalf("%s: AppendJSON produced invalid JSON: %s", f, enc)
		}
		if err := Decode(enc, &b); err != nil {
			t.Fatalf("%s: re-decode: %v\n%s", f, err, enc)
		}
		a.Version, b.Version = "", "" // empty Version is written as 1.0.0
		if diff := compare(&a, &b); diff != "" {
			t.Errorf("%s: round trip: %s", f, diff)
		}
		// Canonical form is a fixed point.
		if enc2 := AppendJSON(nil, &b); !bytes.Equal(enc2, enc) && b.Version != "" {
			t.Errorf("%s: not a fixed point:\n%s\n%s", f, enc, enc2)
		}
	}
}

func TestDecodeZeroAllocs(t *testing.T) {
	raw := benchRecord(3000)
	var c Copy
	if err := Decode(raw, &c); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { _ = Decode(raw, &c) }); n != 0 {
		t.Errorf("Decode allocates %.1f times per record in steady state", n)
	}
	esc, _ := os.ReadFile("testdata/records/escapes_unicode.json")
	_ = Decode(esc, &c)
	if n := testing.AllocsPerRun(200, func() { _ = Decode(esc, &c) }); n != 0 {
		t.Errorf("Decode with escapes allocates %.1f times per record", n)
	}
}

// benchRecord builds a realistic record padded to exactly size bytes.
func benchRecord(size int) []byte {
	c := &Copy{
		CorrelationID: "ff561bdb-5a3c-4c1e-9d2a-0c6b7e3f1a21", ProducerFQDN: "udm1.5gc.mnc030.mcc234.3gppnetwork.org",
		ConsumerFQDN: "ausf1.5gc.mnc030.mcc234.3gppnetwork.org", HopByHopID: "1",
		Timestamp: 1678705695995010066, Direction: RequestIngress, NFType: "SCP",
		NFFQDN: "scp901xwp.5gc.mnc030.mcc234.3gppnetwork.org", NFInstanceID: "c7c359b2-4f0d-4d6e-8f3c-2a1b0e9d8c7f",
		PodInstanceID: "scp901xwp-scp-worker-6cfbdbf84-6wtgk",
		Headers: []Header{
			{":method", []string{"POST"}}, {":scheme", []string{"http"}}, {":authority", []string{"10.251.11.99:8000"}},
			{":path", []string{"/nudm-ueau/v1/suci-0-234-30-0-0-0-9000014975/security-information/generate-auth-data"}},
			{"content-type", []string{"application/json"}}, {"user-agent", []string{"AUSF-auth"}},
			{"3gpp-sbi-target-apiroot", []string{"http://10.251.74.72:8080"}}, {"x-http2-stream-id", []string{"3"}},
		},
	}
	body := []byte(`{"ausfInstanceId":"4178a864-2d3e-4f5a-9b8c-7d6e5f4a3b2c","servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org","resynchronizationInfo":{"rand":"0123456789abcdef0123456789abcdef","auts":"0123456789abcdef0123"},"pad":"`)
	c.Body = append(body, `"}`...)
	n := len(AppendJSON(nil, c))
	if n < size {
		c.Body = append(append(body, strings.Repeat("x", size-n)...), `"}`...)
	}
	return AppendJSON(nil, c)
}

func BenchmarkDecode(b *testing.B) { benchDecode(b, benchRecord(3000)) }

// benchDecode decodes the 3000-byte record raw over and over.
func benchDecode(b *testing.B, raw []byte) {
	if len(raw) != 3000 {
		b.Fatalf("record is %d bytes", len(raw))
	}
	var c Copy
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	for b.Loop() {
		if err := Decode(raw, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeHeaderPad decodes a record with no body whose size is made
// by one long header value, as nfsim pads a bodiless message (a GET, a 204).
func BenchmarkDecodeHeaderPad(b *testing.B) {
	c := &Copy{
		Timestamp: 1678705695995010066, Direction: RequestIngress, NFType: "SCP",
		NFFQDN: "scp901xwp.5gc.mnc030.mcc234.3gppnetwork.org", CorrelationID: "ff561bdb-5a3c-4c1e-9d2a-0c6b7e3f1a21",
		Headers: []Header{
			{":method", []string{"GET"}}, {":scheme", []string{"http"}}, {":authority", []string{"10.251.11.99:8000"}},
			{":path", []string{"/nudm-sdm/v2/imsi-234300000000001/am-data"}}, {"accept", []string{"application/json"}},
			{"x-http2-stream-id", []string{"5"}}, {"x-signalbox-pad", []string{""}},
		},
	}
	n := len(AppendJSON(nil, c))
	c.Headers[len(c.Headers)-1].Values[0] = strings.Repeat("0123456789abcdef", 200)[:3000-n]
	benchDecode(b, AppendJSON(nil, c))
}

func BenchmarkAppendJSON(b *testing.B) {
	raw := benchRecord(3000)
	var c Copy
	if err := Decode(raw, &c); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	for b.Loop() {
		buf = AppendJSON(buf[:0], &c)
	}
}

// oracleDecode is the slow obvious implementation of Decode's rules on top of
// encoding/json, used as a differential oracle.
func oracleDecode(raw []byte) (*Copy, error) {
	if len(raw) > MaxRecordSize {
		return nil, errors.New("too large")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("not an object")
	}
	c := &Copy{Timestamp: -1}
	str := func(m map[string]json.RawMessage, k string) (string, error) {
		v, ok := m[k]
		if !ok || string(v) == "null" {
			return "", nil
		}
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	intval := func(v json.RawMessage, max uint64) (uint64, bool) {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		if s == "" || len(s) > 20 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		var n uint64
		for _, ch := range s {
			if n > (max-uint64(ch-'0'))/10 {
				return 0, false
			}
			n = n*10 + uint64(ch-'0')
		}
		return n, true
	}
	var err error
	if c.Version, err = str(top, "version"); err != nil {
		return nil, err
	}
	var md map[string]json.RawMessage
	if v, ok := top["metadata-list"]; ok {
		if err := json.Unmarshal(v, &md); err != nil {
			return nil, err
		}
	}
	for k, dst := range map[string]*string{"correlation-id": &c.CorrelationID, "producer-id": &c.ProducerID,
		"producer-fqdn": &c.ProducerFQDN, "consumer-id": &c.ConsumerID, "consumer-fqdn": &c.ConsumerFQDN,
		"hop-by-hop-id": &c.HopByHopID, "source-ip": &c.SourceIP, "destination-ip": &c.DestIP} {
		if *dst, err = str(md, k); err != nil {
			return nil, err
		}
	}
	if v, ok := md["timestamp"]; ok && string(v) != "null" {
		n, ok := intval(v, 1<<63-1)
		if !ok {
			return nil, errors.New("bad timestamp")
		}
		// Seconds, milliseconds, microseconds or nanoseconds since the
		// epoch, told apart by size; each unit from 2001-09-09 to 2262.
		switch {
		case n >= 1_000_000_000_000_000_000:
			c.Timestamp = int64(n)
		case n >= 1_000_000_000_000_000 && n <= 9_223_372_036_854_775:
			c.Timestamp = int64(n) * 1000
		case n >= 1_000_000_000_000 && n <= 9_223_372_036_854:
			c.Timestamp = int64(n) * 1_000_000
		case n >= 1_000_000_000 && n <= 9_223_372_036:
			c.Timestamp = int64(n) * 1_000_000_000
		default:
			return nil, errors.New("bad timestamp")
		}
	}
	for k, dst := range map[string]*uint16{"source-port": &c.SourcePort, "destination-port": &c.DestPort} {
		if v, ok := md[k]; ok && string(v) != "null" {
			n, ok := intval(v, 65535)
			if !ok {
				return nil, errors.New("bad port")
			}
			*dst = uint16(n)
		}
	}
	d, err := str(md, "message-direction")
	if err != nil {
		return nil, err
	}
	incomplete := false // a copy all the same (DecodeError.Incomplete)
	if _, ok := md["message-direction"]; ok && string(md["message-direction"]) != "null" {
		if c.Direction = ParseDirection(d); c.Direction == DirUnknown {
			incomplete = true
		}
	}
	var fs map[string]json.RawMessage
	if v, ok := md["feed-source"]; ok {
		if err := json.Unmarshal(v, &fs); err != nil {
			return nil, err
		}
	}
	for k, dst := range map[string]*string{"nf-type": &c.NFType, "nf-fqdn": &c.NFFQDN,
		"nf-instance-id": &c.NFInstanceID, "pod-instance-id": &c.PodInstanceID} {
		if *dst, err = str(fs, k); err != nil {
			return nil, err
		}
	}
	var hl map[string]json.RawMessage
	if v, ok := top["header-list"]; ok {
		if err := json.Unmarshal(v, &hl); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(hl))
	for k := range hl {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		h := Header{Name: k}
		v := hl[k]
		var one string
		var elems []json.RawMessage
		switch {
		case string(v) == "null":
		case v[0] == '"' && json.Unmarshal(v, &one) == nil: // a lone string is one value
			h.Values = []string{one}
		case v[0] == '[' && json.Unmarshal(v, &elems) == nil:
			for _, e := range elems {
				var s string
				if e[0] != '"' || json.Unmarshal(e, &s) != nil {
					incomplete = true // not a string: left out
					continue
				}
				h.Values = append(h.Values, s)
			}
		default:
			incomplete = true
		}
		c.Headers = append(c.Headers, h)
	}
	if v, ok := top["5g-sbi-message"]; ok && string(v) != "null" {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		c.Body = []byte(s)
	}
	if err := c.validate(); err != nil || incomplete {
		return c, errIncomplete
	}
	return c, nil
}

var errIncomplete = errors.New("incomplete copy")

// outcome classes a decode: "ok", "incomplete" (a copy, but lacking what
// packet and xDR feeds need; the fields are all read) or "refused".
func outcome(err error) string {
	var de *DecodeError
	switch {
	case err == nil:
		return "ok"
	case err == errIncomplete, errors.As(err, &de) && de.Incomplete:
		return "incomplete"
	}
	return "refused"
}

// compare reports field differences, treating headers as a name→values map.
func compare(a, b *Copy) string {
	norm := func(c *Copy) Copy {
		n := *c
		n.Raw, n.scratch = nil, nil
		n.Headers = nil
		for _, h := range c.Headers {
			v := h.Values
			if len(v) == 0 {
				v = nil
			}
			n.Headers = append(n.Headers, Header{h.Name, v})
		}
		sort.Slice(n.Headers, func(i, j int) bool { return n.Headers[i].Name < n.Headers[j].Name })
		if len(n.Body) == 0 {
			n.Body = nil
		}
		return n
	}
	na, nb := norm(a), norm(b)
	if !reflect.DeepEqual(na, nb) {
		return fmt.Sprintf("\n%s\nvs\n%s", dump(&na, nil), dump(&nb, nil))
	}
	return ""
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/records/*.json")
	for _, fn := range files {
		raw, err := os.ReadFile(fn)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add(benchRecord(3000))
	var c Copy
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := Decode(raw, &c)
		if err == nil && !json.Valid(raw) {
			t.Fatalf("Decode accepted invalid JSON: %q", raw)
		}
		oc, oerr := oracleDecode(raw)
		if outcome(err) != outcome(oerr) {
			t.Fatalf("acceptance differs: Decode err=%v, oracle err=%v\ninput %q", err, oerr, raw)
		}
		if outcome(err) == "incomplete" {
			if diff := compare(oc, &c); diff != "" {
				t.Fatalf("fields of an incomplete copy differ: %s\ninput %q", diff, raw)
			}
		}
		if err == nil {
			if diff := compare(oc, &c); diff != "" {
				t.Fatalf("fields differ: %s\ninput %q", diff, raw)
			}
			// What Decode accepts, AppendJSON reproduces.
			var back Copy
			if err := Decode(AppendJSON(nil, &c), &back); err != nil {
				t.Fatalf("re-decode of AppendJSON failed: %v", err)
			}
		}
	})
}

// TestHasSpecial checks the 8-byte test against the byte table for every
// byte value in every lane.
func TestHasSpecial(t *testing.T) {
	for lane := 0; lane < 8; lane++ {
		for c := 0; c < 256; c++ {
			var w [8]byte
			for i := range w {
				w[i] = 'a'
			}
			w[lane] = byte(c)
			if got := hasSpecial(binary.LittleEndian.Uint64(w[:])); got != special[c] {
				t.Fatalf("byte %#x in lane %d: hasSpecial %v, table %v", c, lane, got, special[c])
			}
		}
	}
}

// TestPlainEnd steps a runScanner through strings of every length up to 200
// made of plain bytes with special ones (quote, backslash, control,
// non-ASCII) at random places, and checks every stop against the byte table.
func TestPlainEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []byte{'"', '\\', 0, 0x1f, 0x80, 0xff, 0xc3}
	plains := []byte{' ', 'a', '~', 0x7f, '0', '{'}
	for n := 0; n <= 200; n++ {
		for trial := 0; trial < 40; trial++ {
			b := make([]byte, n)
			density := rng.IntN(40) + 1
			for i := range b {
				if rng.IntN(density) == 0 {
					b[i] = specials[rng.IntN(len(specials))]
				} else {
					b[i] = plains[rng.IntN(len(plains))]
				}
			}
			rs := newRunScanner()
			for i := rng.IntN(3); i <= n; i++ {
				want := i
				for want < n && !special[b[want]] {
					want++
				}
				got := rs.plainEnd(b, i)
				if got != want {
					t.Fatalf("%q from %d: plainEnd %d, table %d", b, i, got, want)
				}
				i = got
			}
		}
	}
}

// TestCtlOrHigh checks the word test for control and non-ASCII bytes with
// every byte value at every position of a 40-byte run (both loops and the
// tail), against the byte test.
func TestCtlOrHigh(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 40} {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := bytes.Repeat([]byte{'x'}, n)
				b[pos] = byte(c)
				want := n
				if c < 0x20 || c >= 0x80 {
					want = pos
				}
				if got := ctlOrHigh(b); got != want {
					t.Fatalf("byte %#x at %d of %d: ctlOrHigh %d, want %d", c, pos, n, got, want)
				}
			}
		}
	}
}

// TestDecodeBodyEscapes checks the body's one-pass path and its fallback
// against the oracle on the escapes each handles or leaves to the other.
func TestDecodeBodyEscapes(t *testing.T) {
	bodies := []string{
		`plain`, ``, `{\"a\":\"b\\\\c\/d\"}`, `\b\f\n\r\t`, `\u0041\u00e9\u20ac\u0000`,
		`\ud83d\ude00 pair`, `\ud83d lone`, `\ude00`, `caf\u00e9 é`, "\xff bad utf8", `tail\u12`, `bad \x`,
		"ctl \x01", strings.Repeat(`abcdefg\"`, 50) + strings.Repeat("x", 100),
	}
	var c Copy
	for _, body := range bodies {
		raw := []byte(`{"metadata-list":{"timestamp":1678705695995010066,"message-direction":"REQUEST_INGRESS","feed-source":{"nf-type":"SCP"}},` +
			`"header-list":{":method":["GET"],":path":["/"]},"5g-sbi-message":"` + body + `"}`)
		err := Decode(raw, &c)
		oc, oerr := oracleDecode(raw)
		if (err == nil) != (oerr == nil) {
			t.Errorf("body %q: Decode err=%v, oracle err=%v", body, err, oerr)
			continue
		}
		if err != nil {
			continue
		}
		if !bytes.Equal(c.Body, oc.Body) {
			t.Errorf("body %q: decoded %q, oracle %q", body, c.Body, oc.Body)
		}
	}
}

// FuzzAppendEscaped: a string escaped by appendEscaped decodes (as a JSON
// string) to what encoding/json makes of it, invalid UTF-8 included (each
// bad byte becomes U+FFFD), whichever of the 8-byte and byte paths reached
// each byte.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"", "plain ascii longer than eight", `{"a":"b\\c"}`, "tab\there\nnl\r\x01\x1f",
		"caf\u00e9 \u2028 \U0001F600", "bad \xff\xfe utf8 \xe2\x82", strings.Repeat("x", 17) + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendEscaped([]byte{'"'}, s)
		got = append(got, '"')
		var dec string
		if err := json.Unmarshal(got, &dec); err != nil {
			t.Fatalf("appendEscaped(%q) = %s: not a JSON string: %v", s, got, err)
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var wantDec string
		if err := json.Unmarshal(want, &wantDec); err != nil {
			t.Fatal(err)
		}
		if dec != wantDec {
			t.Fatalf("appendEscaped(%q) decodes to %q, encoding/json's to %q", s, dec, wantDec)
		}
		if b := appendEscaped(nil, []byte(s)); string(b) != string(got[1:len(got)-1]) {
			t.Fatalf("string and []byte forms differ: %s vs %s", b, got[1:len(got)-1])
		}
	})
}

// NFs write timestamps in any of four units; each is read as nanoseconds.
func TestTimestampUnits(t *testing.T) {
	const want = int64(1678705695_000_000_000)
	for _, ts := range []string{"1678705695", "1678705695000", "1678705695000000", "1678705695000000000", "\"1678705695000\""} {
		raw := `{"metadata-list":{"timestamp":` + ts + `,"message-direction":"REQUEST_INGRESS","feed-source":{"nf-type":"SCP"}},"header-list":{":method":["GET"],":path":["/"]}}`
		var c Copy
		if err := Decode([]byte(raw), &c); err != nil || c.Timestamp != want {
			t.Errorf("timestamp %s: %d, %v; want %d", ts, c.Timestamp, err, want)
		}
	}
}
