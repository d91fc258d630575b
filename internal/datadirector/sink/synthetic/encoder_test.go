package synthetic

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const baseTS = 1678705695995010066

func h(name string, values ...string) nfcopy.Header { return nfcopy.Header{Name: name, Values: values} }

// request and response build a transaction's copies the way an SCP writes them.
func request(i int, dir nfcopy.Direction, body []byte) *nfcopy.Copy {
	c := &nfcopy.Copy{
		Version:       "1.0.0",
		CorrelationID: fmt.Sprintf("ff561bdb-%04d", i),
		ProducerFQDN:  "udm1.5gc.mnc030.mcc234.3gppnetwork.org",
		ConsumerFQDN:  "ausf1.5gc.mnc030.mcc234.3gppnetwork.org",
		Timestamp:     baseTS + int64(i)*1000,
		Direction:     dir,
		NFType:        "SCP",
		NFFQDN:        "scp901xwp.5gc.mnc030.mcc234.3gppnetwork.org",
		NFInstanceID:  "c7c359b2-0000-4000-8000-000000000001",
		Headers: []nfcopy.Header{
			h("host", "10.251.11.99:8000"),
			h("x-http2-scheme", "http"),
			h("content-type", "application/json"),
			h("user-agent", "AUSF-auth"),
			h("content-length", strconv.Itoa(len(body))),
			h("x-http2-stream-id", strconv.Itoa(2*i+3)),
			h(":scheme", "http"),
			h(":authority", "10.251.11.99:8000"),
			h(":path", fmt.Sprintf("/nudm-ueau/v1/suci-0-234-30-0-0-0-%010d/security-information/generate-auth-data", i)),
			h(":method", "POST"),
		},
		Body: body,
	}
	return c
}

func response(req *nfcopy.Copy, dir nfcopy.Direction, status string, body []byte) *nfcopy.Copy {
	c := *req
	c.Direction = dir
	c.Timestamp = req.Timestamp + 500_000
	c.Headers = []nfcopy.Header{
		h("content-type", "application/json"),
		h("x-http2-stream-id", headerValue(req, "x-http2-stream-id")),
		h(":status", status),
		h("date", "Mon, 13 Mar 2023 11:08:15 GMT"),
	}
	c.Body = body
	// The response's sender is the request's receiver.
	c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = req.DestIP, req.SourceIP, req.DestPort, req.SourcePort
	return &c
}

func jsonBody(n int) []byte {
	b := []byte(`{"servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org","pad":"`)
	for len(b) < n-2 {
		b = append(b, byte('a'+len(b)%26))
	}
	return append(b, `"}`...)
}

// sampleCopies covers the cases the encoder distinguishes.
func sampleCopies() []*nfcopy.Copy {
	req := request(1, nfcopy.RequestIngress, jsonBody(300))
	get := request(2, nfcopy.RequestEgress, nil)
	get.Headers[9] = h(":method", "GET")
	upper := request(3, nfcopy.RequestIngress, jsonBody(50))
	upper.Headers = append(upper.Headers, h("Connection", "keep-alive"), h("X-Custom", "a", "b"))
	v6 := request(4, nfcopy.RequestIngress, jsonBody(20))
	v6.SourceIP, v6.SourcePort, v6.DestIP, v6.DestPort = "2001:db8::1", 40000, "2001:db8::2", 443
	noStream := request(5, nfcopy.RequestEgress, jsonBody(10))
	noStream.Headers = noStream.Headers[:5]
	noStream.Headers = append(noStream.Headers, h(":method", "PUT"), h(":path", "/x"), h(":scheme", "https"))
	return []*nfcopy.Copy{
		req,
		response(req, nfcopy.ResponseEgress, "200", jsonBody(200)),
		get,
		response(get, nfcopy.ResponseIngress, "204", nil),
		upper,
		v6,
		response(v6, nfcopy.ResponseEgress, "503", []byte(`{"cause":"NF_CONGESTION"}`)),
		noStream,
		response(noStream, nfcopy.ResponseIngress, "201", jsonBody(40)),
	}
}

func encodeAll(opts EncoderOptions, copies []*nfcopy.Copy) []byte {
	e := NewEncoder(opts)
	b := e.AppendHeader(nil)
	for _, c := range copies {
		b = e.AppendCopy(b, c)
	}
	return b
}

func TestGolden(t *testing.T) {
	got := encodeAll(EncoderOptions{}, sampleCopies())
	path := filepath.Join("testdata", "sample.pcap")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding differs from %s (%d vs %d bytes); run with -update if intended", path, len(got), len(want))
	}
}

func TestRoundTrip(t *testing.T) {
	big := request(10, nfcopy.RequestIngress, jsonBody(150_000)) // several DATA frames and TCP segments
	hugeHdr := request(11, nfcopy.RequestIngress, jsonBody(10))
	hugeHdr.Headers = append(hugeHdr.Headers, h("x-big", strings.Repeat("v", 40_000))) // CONTINUATION
	hugeV6 := request(12, nfcopy.RequestIngress, jsonBody(70_000))
	hugeV6.SourceIP, hugeV6.DestIP = "2001:db8::a", "2001:db8::b"
	noCorr := request(13, nfcopy.RequestIngress, jsonBody(10))
	noCorr.CorrelationID = ""
	noCorr.Headers = noCorr.Headers[:5]
	noCorr.Headers = append(noCorr.Headers, h(":method", "POST"), h(":path", "/y"))
	noCorr2 := *noCorr
	noCorr2.Timestamp++
	tests := []struct {
		name   string
		copies []*nfcopy.Copy
	}{
		{"sample", sampleCopies()},
		{"large body", []*nfcopy.Copy{big, response(big, nfcopy.ResponseEgress, "200", jsonBody(100_000))}},
		{"large header block", []*nfcopy.Copy{hugeHdr}},
		{"large ipv6", []*nfcopy.Copy{hugeV6, response(hugeV6, nfcopy.ResponseEgress, "200", nil)}},
		{"no correlation id", []*nfcopy.Copy{noCorr, &noCorr2}},
		{"repeated flow", append(sampleCopies(), sampleCopies()...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, err := decodeStream(encodeAll(EncoderOptions{}, tt.copies))
			if err != nil {
				t.Fatal(err)
			}
			checkMessages(t, tt.copies, msgs)
		})
	}
}

func TestStreamIDs(t *testing.T) {
	c := sampleCopies()
	msgs, err := decodeStream(encodeAll(EncoderOptions{}, c))
	if err != nil {
		t.Fatal(err)
	}
	// The NF's own stream ids are kept while they rise on their flow.
	for _, i := range []int{0, 2, 4} {
		if want := headerValue(c[i], "x-http2-stream-id"); strconv.Itoa(int(msgs[i].streamID)) != want {
			t.Errorf("copy %d: stream %d, want the NF's %s", i, msgs[i].streamID, want)
		}
	}
	// The copy without x-http2-stream-id takes its flow's next stream, and
	// its response follows it there.
	if msgs[7].streamID != 1 || msgs[8].streamID != 1 {
		t.Errorf("request without a stream id on stream %d, its response on %d; want 1 and 1", msgs[7].streamID, msgs[8].streamID)
	}

	// Netty leaves x-http2-stream-id off a response: it still goes on its
	// request's stream. Two NF connections merged into one synthetic flow
	// reuse their ids: the second is renumbered above the first.
	a := request(1, nfcopy.RequestIngress, nil)
	b := request(2, nfcopy.RequestIngress, nil)
	setHeader(b, "x-http2-stream-id", headerValue(a, "x-http2-stream-id"))
	ra := response(a, nfcopy.ResponseEgress, "200", nil)
	ra.Headers = slices.DeleteFunc(ra.Headers, func(h nfcopy.Header) bool { return h.Name == "x-http2-stream-id" })
	rb := response(b, nfcopy.ResponseEgress, "200", nil)
	retry := request(1, nfcopy.RequestIngress, nil) // an SCP retry: same correlation id, another hop
	retry.HopByHopID = "hop-2"
	copies := []*nfcopy.Copy{a, b, retry, rb, ra, response(retry, nfcopy.ResponseEgress, "503", nil)}
	msgs, err = decodeStream(encodeAll(EncoderOptions{}, copies))
	if err != nil {
		t.Fatal(err)
	}
	checkMessages(t, copies, msgs)
	if msgs[0].streamID == msgs[1].streamID || msgs[1].streamID <= msgs[0].streamID || msgs[2].streamID <= msgs[1].streamID {
		t.Errorf("streams %d, %d, %d: want rising ids on one flow", msgs[0].streamID, msgs[1].streamID, msgs[2].streamID)
	}
}

func setHeader(c *nfcopy.Copy, name, value string) {
	for i := range c.Headers {
		if c.Headers[i].Name == name {
			c.Headers[i].Values = []string{value}
		}
	}
}

func TestAddresses(t *testing.T) {
	ap := netip.MustParseAddrPort
	mappings := []Mapping{
		{NFFQDN: "SCP901XWP.5gc.mnc030.mcc234.3gppnetwork.org", Addr: ap("192.0.2.10:9443")},
		{NFInstanceID: "udm-instance-1", Addr: ap("192.0.2.20:8443")},
		{NFFQDN: "ausf1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: ap("192.0.2.30:1234")},
		{NFFQDN: "v6.example", Addr: ap("[2001:db8::30]:7777")},
	}
	base := func(dir nfcopy.Direction) *nfcopy.Copy {
		c := request(1, dir, nil)
		if !dir.IsRequest() {
			c = response(c, dir, "200", nil)
		}
		return c
	}
	tests := []struct {
		name           string
		copy           func() *nfcopy.Copy
		client, server string // "" port means: check only the IP
	}{
		{"request ingress: consumer -> NF (mapped)", func() *nfcopy.Copy { return base(nfcopy.RequestIngress) },
			"192.0.2.30", "192.0.2.10:9443"},
		{"response egress: NF -> consumer", func() *nfcopy.Copy { return base(nfcopy.ResponseEgress) },
			"192.0.2.30", "192.0.2.10:9443"},
		{"request egress: NF -> producer (by instance id)", func() *nfcopy.Copy {
			c := base(nfcopy.RequestEgress)
			c.ProducerID = "udm-instance-1"
			return c
		}, "192.0.2.10", "192.0.2.20:8443"},
		{"response ingress: producer fqdn is an IP", func() *nfcopy.Copy {
			c := base(nfcopy.ResponseIngress)
			c.ProducerFQDN = "10.251.74.72"
			return c
		}, "192.0.2.10", "10.251.74.72:8080"},
		{"metadata wins, request", func() *nfcopy.Copy {
			c := base(nfcopy.RequestIngress)
			c.SourceIP, c.SourcePort, c.DestIP, c.DestPort = "198.51.100.1", 50000, "198.51.100.2", 8443
			return c
		}, "198.51.100.1:50000", "198.51.100.2:8443"},
		{"metadata wins, response: source is the server", func() *nfcopy.Copy {
			c := base(nfcopy.ResponseEgress)
			c.SourceIP, c.SourcePort, c.DestIP, c.DestPort = "198.51.100.2", 8443, "198.51.100.1", 50000
			return c
		}, "198.51.100.1:50000", "198.51.100.2:8443"},
		{"https default port, hashed default address", func() *nfcopy.Copy {
			c := base(nfcopy.RequestEgress)
			c.NFFQDN, c.NFInstanceID = "", ""
			c.ConsumerFQDN = "unmapped-consumer"
			c.ProducerFQDN = "unmapped-producer"
			c.Headers[6] = h(":scheme", "https")
			return c
		}, "10.", "10.*:8088"},
		{"mixed families lift IPv4 into IPv6", func() *nfcopy.Copy {
			c := base(nfcopy.RequestIngress)
			c.NFFQDN = "v6.example"
			return c
		}, "::ffff:192.0.2.30", "[2001:db8::30]:7777"},
	}
	e := NewEncoder(EncoderOptions{Mappings: mappings, KeepPorts: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.copy()
			client, server := e.endpoints(c, scanHeaders(c))
			if !matchAddr(client, tt.client) || !matchAddr(server, tt.server) {
				t.Errorf("client %v server %v, want %s %s", client, server, tt.client, tt.server)
			}
			if !strings.Contains(tt.client, ":") || strings.Contains(tt.client, "::") {
				if p := client.Port(); p < 32768 || p > 60999 {
					t.Errorf("client port %d not ephemeral", p)
				}
			}
			// Stable: the same copy maps to the same flow.
			c2, s2 := e.endpoints(c, scanHeaders(c))
			if c2 != client || s2 != server {
				t.Errorf("unstable endpoints")
			}
		})
	}
}

// matchAddr matches "ip:port", "[ip6]:port", a bare IP, an IP prefix ("10.")
// or "10.*:port".
func matchAddr(got netip.AddrPort, want string) bool {
	if ap, err := netip.ParseAddrPort(want); err == nil {
		return got == ap
	}
	if a, err := netip.ParseAddr(want); err == nil {
		return got.Addr() == a
	}
	if pfx, port, ok := strings.Cut(want, "*:"); ok {
		return strings.HasPrefix(got.Addr().String(), pfx) && strconv.Itoa(int(got.Port())) == port
	}
	return strings.HasPrefix(got.Addr().String(), want)
}

func TestResetResendsSetup(t *testing.T) {
	e := NewEncoder(EncoderOptions{})
	c := sampleCopies()[0]
	first := e.AppendCopy(nil, c)
	again := e.AppendCopy(nil, c)
	e.Reset()
	afterReset := e.AppendCopy(nil, c)
	if len(first) <= len(again) || len(afterReset) != len(first) {
		t.Fatalf("set-up records: first %d, again %d, after reset %d bytes", len(first), len(again), len(afterReset))
	}
}

// Without KeepPorts, every server port is one Wireshark dissects as HTTP.
func TestDecodablePorts(t *testing.T) {
	e := NewEncoder(EncoderOptions{Mappings: []Mapping{{NFFQDN: "scp901xwp.5gc.mnc030.mcc234.3gppnetwork.org", Addr: netip.MustParseAddrPort("192.0.2.10:9443")}}})
	for _, tt := range []struct {
		port   uint16
		scheme string
		want   uint16
	}{
		{443, "https", 8088}, {8443, "https", 8088}, {29510, "http", 8080}, {8000, "http", 8080},
		{80, "http", 80}, {80, "https", 80}, {8080, "https", 8080}, {0, "https", 8088}, {0, "http", 8080},
	} {
		c := request(1, nfcopy.RequestEgress, nil)
		setHeader(c, ":scheme", tt.scheme)
		setHeader(c, "x-http2-scheme", tt.scheme)
		c.SourceIP, c.SourcePort, c.DestIP, c.DestPort = "198.51.100.1", 50000, "198.51.100.2", tt.port
		_, server := e.endpoints(c, scanHeaders(c))
		if server.Port() != tt.want || !httpPort(server.Port()) {
			t.Errorf("%s copy to port %d: server port %d, want %d", tt.scheme, tt.port, server.Port(), tt.want)
		}
	}
	// The NF mapped to 9443 serves on a port Wireshark decodes.
	c := request(1, nfcopy.RequestIngress, nil)
	if _, server := e.endpoints(c, scanHeaders(c)); server != netip.MustParseAddrPort("192.0.2.10:8080") {
		t.Errorf("mapped NF served at %v", server)
	}
}

// Peers the metadata does not name are named by the SBI headers that carry
// them, so unidentified consumers do not collapse into one flow.
func TestPeersFromSBIHeaders(t *testing.T) {
	e := NewEncoder(EncoderOptions{})
	anon := func(hdrs ...nfcopy.Header) *nfcopy.Copy {
		c := request(1, nfcopy.RequestEgress, nil)
		c.ConsumerFQDN, c.ProducerFQDN, c.NFFQDN, c.NFInstanceID = "", "", "", ""
		c.Headers = append(c.Headers[:0:0], hdrs...)
		return c
	}
	flowOf := func(c *nfcopy.Copy) flowKey {
		cl, sv := e.endpoints(c, scanHeaders(c))
		return flowKey{cl, sv}
	}
	peer := func(v string) nfcopy.Header { return h("3gpp-Sbi-NF-Peer-Info", v) }
	a := flowOf(anon(peer("srcinst=54804518-4191-46b3-955c-ac631f953ed8; dstinst=8a3a1c9e-0000-4000-8000-000000000002")))
	b := flowOf(anon(peer("srcinst=11111111-4191-46b3-955c-ac631f953ed8; dstinst=8a3a1c9e-0000-4000-8000-000000000002")))
	if a.client.Addr() == b.client.Addr() || a.server != b.server {
		t.Errorf("two consumers of one producer (by 3gpp-Sbi-NF-Peer-Info): %v and %v", a, b)
	}
	ua1 := flowOf(anon(h("user-agent", "AMF-54804518-4191-46b3-955c-ac631f953ed8"), h(":authority", "udm1.example.net:8080")))
	ua2 := flowOf(anon(h("user-agent", "SMF-9e0c0a44-0000-4000-8000-000000000009"), h(":authority", "udm1.example.net:8080")))
	if ua1.client.Addr() == ua2.client.Addr() || ua1.server != ua2.server {
		t.Errorf("two consumers by User-Agent of one :authority: %v and %v", ua1, ua2)
	}
	lit := flowOf(anon(h(":authority", "10.251.11.99:8000")))
	if lit.server.Addr() != netip.MustParseAddr("10.251.11.99") {
		t.Errorf(":authority with an IP gave server %v", lit.server)
	}
	// A response names the peers the other way round.
	resp := anon(peer("srcinst=8a3a1c9e-0000-4000-8000-000000000002; dstinst=54804518-4191-46b3-955c-ac631f953ed8"), h(":status", "200"))
	resp.Direction = nfcopy.ResponseIngress
	if r := flowOf(resp); r != a {
		t.Errorf("response flow %v, request flow %v", r, a)
	}
}

// The flow table is bounded; a flow pushed out is closed with FIN and opens
// afresh when it returns, so the stream stays valid TCP throughout. It holds
// every flow up to its size, whatever their addresses, and pushes out the
// least recently used.
func TestFlowTableBounded(t *testing.T) {
	e := NewEncoder(EncoderOptions{MaxFlows: 3})
	out := e.AppendHeader(nil)
	for i := 0; i < 200; i++ {
		c := request(i, nfcopy.RequestIngress, nil)
		c.SourceIP, c.SourcePort = "192.0.2.1", uint16(30000+i%50)
		first := len(out)
		out = e.AppendCopy(out, c)
		mid := len(out)
		out = e.AppendCopy(out, c)
		if again := len(out) - mid; again >= mid-first { // a flow's second copy right after its first needs no opening
			t.Fatalf("copy %d: %d bytes again after %d: flow not kept", i, again, mid-first)
		}
		if n := len(e.flows.slots); n > 3 {
			t.Fatalf("flow table at %d slots", n)
		}
	}
	_, st, err := decodeStreamStats(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.fins != 2*(200-3) || st.syns != 2*200 || e.Evicted() != 200-3 {
		t.Errorf("%d FINs, %d SYNs, %d evicted for 200 openings of which 197 were pushed out", st.fins, st.syns, e.Evicted())
	}

	// 5,000 flows in a table of 5,000, in any order, twice: none pushed
	// out. One more flow pushes out the least recently used only.
	e = NewEncoder(EncoderOptions{MaxFlows: 5_000})
	out = e.AppendHeader(out[:0])
	for pass := range 2 {
		for i := range 5_000 {
			c := request(pass*5_000+i, nfcopy.RequestIngress, nil)
			j := (i * 7919) % 5_000
			c.SourceIP, c.SourcePort = fmt.Sprintf("10.1.%d.%d", j>>8, j&0xff), uint16(40000+j%20000)
			out = e.AppendCopy(out, c)
		}
	}
	if e.Evicted() != 0 || e.flows.n != 5_000 {
		t.Fatalf("%d flows pushed out of a table that holds them all (%d held)", e.Evicted(), e.flows.n)
	}
	server := e.flows.slots[e.flows.head].key.server // every copy's
	client := func(j int) flowKey {
		return flowKey{netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("10.1.%d.%d", j>>8, j&0xff)), uint16(40000+j)), server}
	}
	c := request(99_999, nfcopy.RequestIngress, nil)
	c.SourceIP, c.SourcePort = "10.9.9.9", 1234
	out = e.AppendCopy(out, c)
	// The second pass's first copy was flow 0's; its second, flow 7,919 mod 5,000.
	if e.Evicted() != 1 || e.flows.find(client(0)) != nil || e.flows.find(client(2_919)) == nil {
		t.Errorf("one more flow: %d pushed out; want 1, the least recently used", e.Evicted())
	}
}

// Segments are at most the MSS, and a side that receives much acknowledges
// it before the window would be full.
func TestSegmentsAndAcks(t *testing.T) {
	big := request(1, nfcopy.RequestIngress, jsonBody(200_000))
	for _, mss := range []int{0, 536, 9000} {
		data := encodeAll(EncoderOptions{MSS: mss}, []*nfcopy.Copy{big, request(2, nfcopy.RequestIngress, jsonBody(100_000))})
		_, st, err := decodeStreamStats(data)
		if err != nil {
			t.Fatal(err)
		}
		want := mss
		if want == 0 {
			want = DefaultMSS
		}
		if st.maxPayload != want {
			t.Errorf("MSS %d: largest segment %d bytes", mss, st.maxPayload)
		}
		if min := 300_000 / ackEvery; st.bareAcks < min {
			t.Errorf("MSS %d: %d bare ACKs for 300 KB one way, want >= %d", mss, st.bareAcks, min)
		}
	}
}

func BenchmarkAppendCopy(b *testing.B) {
	e := NewEncoder(EncoderOptions{})
	c := request(1, nfcopy.RequestIngress, jsonBody(3000))
	buf := e.AppendCopy(nil, c)
	b.ReportAllocs()
	b.SetBytes(int64(len(c.Body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = e.AppendCopy(buf[:0], c)
	}
}

func FuzzAppendCopy(f *testing.F) {
	f.Add("POST", "/nudm-ueau/v1/x", "200", "content-type", "application/json", []byte(`{"a":1}`), uint8(1), "", "", "3")
	f.Add("GET", "/", "", "X-Up", "v", []byte{}, uint8(0), "2001:db8::1", "10.0.0.1", "")
	f.Add("", "", "500", "te", "gzip", make([]byte, 20000), uint8(4), "bad-ip", "", "99999999999")
	f.Fuzz(func(t *testing.T, method, path, status, hname, hval string, body []byte, dir uint8, src, dst, sid string) {
		c := &nfcopy.Copy{
			CorrelationID: path,
			Direction:     nfcopy.Direction(dir % 6),
			SourceIP:      src,
			DestIP:        dst,
			NFFQDN:        hname,
			Body:          body,
			Timestamp:     int64(len(body)) * 1e9,
		}
		if method != "" {
			c.Headers = append(c.Headers, h(":method", method), h(":path", path))
		}
		if status != "" {
			c.Headers = append(c.Headers, h(":status", status))
		}
		c.Headers = append(c.Headers, h(hname, hval), h("x-http2-stream-id", sid))
		e := NewEncoder(EncoderOptions{})
		data := e.AppendCopy(e.AppendHeader(nil), c)
		msgs, err := decodeStream(data)
		if err != nil {
			t.Fatalf("own output does not decode: %v", err)
		}
		if len(msgs) != 1 || !bytes.Equal(msgs[0].body, body) {
			t.Fatalf("decoded %d messages", len(msgs))
		}
	})
}

// TestChecksum compares the word-at-a-time Internet checksum with RFC 1071's
// plain 16-bit sum, for every length up to 70 bytes and random contents.
func TestChecksum(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	naive := func(b []byte, init uint64) uint16 {
		sum := init
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint64(b[i])<<8 | uint64(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint64(b[len(b)-1]) << 8
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		return ^uint16(sum)
	}
	for n := 0; n <= 70; n++ {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rnd.Uint32())
				if rnd.IntN(4) == 0 {
					b[i] = 0xff // long runs of ones exercise the carries
				}
			}
			init := rnd.Uint64() >> (24 + rnd.IntN(40)) // a pseudo-header sum: small
			if got, want := checksum(b, init), naive(b, init); got != want {
				t.Fatalf("len %d init %#x: checksum %#04x, want %#04x (% x)", n, init, got, want, b)
			}
		}
	}
}

// BenchmarkAppendCopyNewFlows: the client port changes with every copy,
// cycling through 20,000 flows (more than the flow table holds), so each
// copy opens a flow and is preceded by its set-up records.
func BenchmarkAppendCopyNewFlows(b *testing.B) {
	benchFlows(b, func(i int) (string, uint16) { return "10.1.2.3", uint16(40000 + i%20000) })
}

// BenchmarkAppendCopyFlowPairs: each flow carries a request and a response
// copy and is not seen again.
func BenchmarkAppendCopyFlowPairs(b *testing.B) {
	ip, hi := "", -1
	benchFlows(b, func(i int) (string, uint16) {
		f := i / 2
		if f>>16 != hi { // a new address every 65,536 flows
			hi = f >> 16
			ip = netip.AddrFrom4([4]byte{10, 1, byte(hi >> 8), byte(hi)}).String()
		}
		return ip, uint16(f)
	})
}

func benchFlows(b *testing.B, client func(i int) (string, uint16)) {
	e := NewEncoder(EncoderOptions{})
	c := request(1, nfcopy.RequestIngress, jsonBody(2400))
	c.SourceIP, c.DestIP, c.DestPort = "10.1.2.3", "10.200.3.4", 8080
	buf := e.AppendCopy(nil, c)
	b.ReportAllocs()
	b.SetBytes(int64(len(c.Body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.SourceIP, c.SourcePort = client(i)
		buf = e.AppendCopy(buf[:0], c)
	}
}
