package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
	"github.com/signalbox/signalbox/internal/testkit"

	"github.com/signalbox/signalbox/internal/testkit/pki"
)

// streamWriter builds a synthetic stream per the contract in synthetic.go,
// as internal/datadirector/sink/synthetic writes it.
type streamWriter struct {
	t    testing.TB
	w    *pcapgo.Writer
	ipv6 bool
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	fbuf bytes.Buffer
	fr   *http2.Framer
	sbuf gopacket.SerializeBuffer
	seq  [2]uint32 // next sequence number, client→server and server→client
	port uint16    // the client's port; 40000 when 0
}

func newStreamWriter(t testing.TB, out io.Writer) *streamWriter {
	s := &streamWriter{t: t, w: pcapgo.NewWriterNanos(out), sbuf: gopacket.NewSerializeBuffer()}
	if err := s.w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	s.enc = hpack.NewEncoder(&s.hbuf)
	s.enc.SetMaxDynamicTableSize(0) // no dynamic table: stateless blocks after a size update
	s.fr = http2.NewFramer(&s.fbuf, nil)
	return s
}

// packet writes one record with payload, client→server unless server.
func (s *streamWriter) packet(payload []byte, ts time.Time, server bool) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	port := layers.TCPPort(40000)
	if s.port != 0 {
		port = layers.TCPPort(s.port)
	}
	dir := 0
	if server {
		dir = 1
	}
	tcp := &layers.TCP{SrcPort: port, DstPort: 8080, Seq: s.seq[dir], Ack: s.seq[1-dir], ACK: true, PSH: true, Window: 65535}
	if server {
		tcp.SrcPort, tcp.DstPort = 8080, port
	}
	s.seq[dir] += uint32(len(payload))
	var ls []gopacket.SerializableLayer
	if s.ipv6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		if server {
			ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
		}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{eth, ip, tcp, gopacket.Payload(payload)}
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
			SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
		if server {
			ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
		}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		ls = []gopacket.SerializableLayer{eth, ip, tcp, gopacket.Payload(payload)}
	}
	if err := gopacket.SerializeLayers(s.sbuf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		s.t.Fatal(err)
	}
	data := s.sbuf.Bytes()
	if err := s.w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: len(data)}, data); err != nil {
		s.t.Fatal(err)
	}
}

// preface writes the flow's first packets: client preface + SETTINGS, and
// the server's SETTINGS.
func (s *streamWriter) preface() {
	s.fbuf.Reset()
	s.fbuf.WriteString(http2.ClientPreface)
	_ = s.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	s.packet(s.fbuf.Bytes(), time.Now(), false)
	s.fbuf.Reset()
	_ = s.fr.WriteSettings()
	s.packet(s.fbuf.Bytes(), time.Now(), true)
}

// copyFrames returns the HTTP/2 frames of one copy.
func (s *streamWriter) copyFrames(c *nfcopy.Copy) []byte {
	s.hbuf.Reset()
	for _, h := range c.Headers {
		for _, v := range h.Values {
			_ = s.enc.WriteField(hpack.HeaderField{Name: h.Name, Value: v})
		}
	}
	s.fbuf.Reset()
	stream := c.StreamID()
	_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: s.hbuf.Bytes(),
		EndHeaders: true, EndStream: len(c.Body) == 0})
	for body := c.Body; len(body) > 0; {
		n := min(len(body), 16384)
		_ = s.fr.WriteData(stream, n == len(body), body[:n])
		body = body[n:]
	}
	return s.fbuf.Bytes()
}

func testCopy(nf string, seq int64, size int) *nfcopy.Copy {
	c := &nfcopy.Copy{NFType: nf, Direction: nfcopy.RequestIngress, Timestamp: time.Now().UnixNano(), CorrelationID: "c-" + strconv.FormatInt(seq, 10),
		Headers: []nfcopy.Header{
			{Name: ":method", Values: []string{"POST"}}, {Name: ":scheme", Values: []string{"http"}},
			{Name: ":authority", Values: []string{"udm1.5gc.mnc030.mcc234.3gppnetwork.org"}},
			{Name: ":path", Values: []string{"/nudm-ueau/v1/imsi-234300000000001/security-information/generate-auth-data"}},
			{Name: "content-type", Values: []string{"application/json"}},
			{Name: "x-http2-stream-id", Values: []string{strconv.FormatInt(2*seq+1, 10)}},
			{Name: "x-signalbox-seq", Values: []string{"run1/" + nf + "/" + strconv.FormatInt(seq, 10)}},
		}}
	c.Body = []byte(`{"servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org","pad":"` + strings.Repeat("x", max(0, size-1100)) + `"}`)
	return c
}

func TestSyntheticStream(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", ipv6), func(t *testing.T) {
			var buf bytes.Buffer
			sw := newStreamWriter(t, &buf)
			sw.ipv6 = ipv6
			sw.preface()
			sent := time.Now().Add(-2 * time.Millisecond)
			for _, n := range []int64{1, 2, 4, 4, 5} { // 3 missing, 4 duplicated
				sw.packet(sw.copyFrames(testCopy("SCP", n, 3000)), sent, false)
			}
			sw.packet(sw.copyFrames(testCopy("NRF", 1, 20000)), sent, false) // DATA in two frames
			// Response without body: HEADERS with END_STREAM.
			resp := &nfcopy.Copy{Headers: []nfcopy.Header{{Name: ":status", Values: []string{"204"}},
				{Name: "x-http2-stream-id", Values: []string{"9"}}, {Name: "x-signalbox-seq", Values: []string{"run1/NRF/2"}}}}
			sw.packet(sw.copyFrames(resp), sent, true)
			// Invalid ones: garbage, a copy whose last segment is lost (the
			// next segment is not where the flow left off), a HEADERS
			// without END_STREAM followed by another copy's HEADERS.
			sw.packet([]byte("GET / HTTP/1.1\r\n\r\n"), sent, false)
			full := sw.copyFrames(testCopy("SCP", 6, 3000))
			sw.packet(full[:len(full)-10], sent, false)
			sw.seq[0] += 10
			sw.fbuf.Reset()
			_ = sw.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 11, BlockFragment: []byte{0x82}, EndHeaders: true})
			sw.packet(sw.fbuf.Bytes(), sent, false)
			sw.packet(sw.copyFrames(testCopy("SCP", 7, 3000)), sent, false)

			s := newStats(0, "")
			if err := newConnDecoder(s).run(&buf); err != nil {
				t.Fatal(err)
			}
			r := s.report(ModeSynthetic)
			want := Report{Received: 7, Unique: 6, Duplicates: 1, Missing: 1, Invalid: 3, Control: 2}
			if r.Received != want.Received || r.Unique != want.Unique || r.Duplicates != want.Duplicates ||
				r.Missing != want.Missing || r.Invalid != want.Invalid || r.Control != want.Control {
				t.Errorf("report %+v", r)
			}
			// Bodies: 5 SCP copies of 1900+ bytes, one NRF copy of 18900+, one without.
			if r.Body < 5*1900+18900 || r.Body > r.Bytes {
				t.Errorf("body bytes %d of %d", r.Body, r.Bytes)
			}
			if r.PerNF["SCP"] != 4 || r.PerNF["NRF"] != 2 {
				t.Errorf("per NF %v", r.PerNF)
			}
			if r.InvalidReasons["tcp_out_of_order"] != 1 || r.InvalidReasons["bad_frame"] != 2 {
				t.Errorf("invalid reasons %v: want one tcp_out_of_order and two bad_frame", r.InvalidReasons)
			}
			if r.Latency.Count != 7 || r.Latency.P50 < 2000 || r.Latency.Max > 10_000_000 {
				t.Errorf("latency %+v: want 7 samples of at least 2ms", r.Latency)
			}
		})
	}
}

func TestSyntheticBadHeader(t *testing.T) {
	tests := []struct {
		name string
		hdr  []byte
	}{
		{"magic", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"linktype", func() []byte {
			var b bytes.Buffer
			_ = pcapgo.NewWriterNanos(&b).WriteFileHeader(65535, layers.LinkTypeRaw)
			return b.Bytes()
		}()},
		{"short", []byte{0xd4, 0xc3, 0xb2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newConnDecoder(newStats(0, "")).run(bytes.NewReader(tt.hdr))
			if se, ok := err.(*errStream); !ok || se.reason != "bad_pcap_header" {
				t.Fatalf("got %v, want bad_pcap_header", err)
			}
		})
	}
	// A record longer than the limit is a framing error, not a hang.
	var b bytes.Buffer
	w := pcapgo.NewWriterNanos(&b)
	_ = w.WriteFileHeader(0, layers.LinkTypeEthernet)
	b.Write([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	err := newConnDecoder(newStats(0, "")).run(&b)
	if se, ok := err.(*errStream); !ok || se.reason != "bad_record_length" {
		t.Fatalf("got %v, want bad_record_length", err)
	}
}

// selfSigned writes a certificate and key for 127.0.0.1 into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	ca := pki.NewCA(t, "probe-ca")
	certFile, keyFile = ca.Server(t, "127.0.0.1").Files(t, dir, "cert")
	return certFile, keyFile, ca.Pool
}

func TestSyntheticOverTCPAndTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			cfg := Config{Listen: "127.0.0.1:0", Mode: ModeSynthetic, Expect: 200}
			if useTLS {
				cfg.TLSCert, cfg.TLSKey = certFile, keyFile
			}
			p := startProbe(t, cfg)
			var conn net.Conn
			var err error
			if useTLS {
				conn, err = tls.Dial("tcp", p.Addr(), &tls.Config{RootCAs: pool})
			} else {
				conn, err = net.Dial("tcp", p.Addr())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Two connections' worth: each starts with its own global header.
			for half := 0; half < 2; half++ {
				if half == 1 {
					conn.Close()
					if useTLS {
						conn, err = tls.Dial("tcp", p.Addr(), &tls.Config{RootCAs: pool})
					} else {
						conn, err = net.Dial("tcp", p.Addr())
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				sw := newStreamWriter(t, conn)
				sw.preface()
				for i := int64(1); i <= 100; i++ {
					sw.packet(sw.copyFrames(testCopy("SEPP", int64(half)*100+i, 3000)), time.Now(), false)
				}
			}
			select {
			case <-p.Done():
			case <-time.After(20 * time.Second):
				t.Fatalf("probe did not see 200 copies: %+v", p.Snapshot())
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			r := p.Snapshot()
			if r.Unique != 200 || r.Missing != 0 || r.Invalid != 0 || r.PerNF["SEPP"] != 200 || r.Connections != 2 {
				t.Errorf("report %+v", r)
			}
		})
	}
}

func TestHTTP2Mode(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			cfg := Config{Listen: "127.0.0.1:0", Mode: ModeHTTP2}
			tr := &http.Transport{}
			var protos http.Protocols
			scheme := "http"
			if useTLS {
				cfg.TLSCert, cfg.TLSKey = certFile, keyFile
				protos.SetHTTP2(true)
				tr.TLSClientConfig = &tls.Config{RootCAs: pool}
				scheme = "https"
			} else {
				protos.SetUnencryptedHTTP2(true)
			}
			tr.Protocols = &protos
			client := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			url := scheme + "://" + p.Addr() + "/copies"
			post := func(ct string, body []byte) {
				t.Helper()
				resp, err := client.Post(url, ct, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent || resp.ProtoMajor != 2 {
					t.Fatalf("got %s over %s", resp.Status, resp.Proto)
				}
			}
			var nd []byte
			for i := int64(1); i <= 50; i++ {
				nd = nfcopy.AppendJSON(nd, testCopy("SCP", i, 3000))
				nd = append(nd, '\n')
			}
			nd = append(nd, nfcopy.AppendJSON(nil, testCopy("SCP", 7, 3000))...) // a duplicate
			nd = append(nd, "\n{\"metadata-list\":{}}\n"...)                     // invalid
			post("application/x-ndjson", nd)
			post("application/json", nfcopy.AppendJSON(nil, testCopy("NRF", 1, 500)))
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("GET: %s", resp.Status)
			}
			r := p.Snapshot()
			if r.Received != 52 || r.Unique != 51 || r.Duplicates != 1 || r.Invalid != 1 ||
				r.InvalidReasons["missing_field"] != 1 || r.PerNF["SCP"] != 50 || r.PerNF["NRF"] != 1 || r.Latency.Count != 52 {
				t.Errorf("report %+v", r)
			}
		})
	}
}

// startProbe starts a probe that stops with the test.
func startProbe(t *testing.T, cfg Config) *Probe {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// A POST the sender abandons mid-body (it stopped or restarted) is counted
// as aborted, not as an invalid copy: an at-least-once sender resends it.
func TestHTTP2AbortedRequest(t *testing.T) {
	p := startProbe(t, Config{Listen: "127.0.0.1:0", Mode: ModeHTTP2})
	ctx := t.Context()
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	rctx, abort := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+p.Addr()+"/copies", pr)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	rec := nfcopy.AppendJSON(nil, testCopy("SCP", 1, 3000))
	if _, err := pw.Write(rec[:1000]); err != nil { // part of the copy reaches the probe
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	abort() // the sender resets the stream
	<-done
	pw.Close()
	deadline := time.Now().Add(5 * time.Second)
	for p.Snapshot().Aborted == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := p.Snapshot(); r.Aborted != 1 || r.Invalid != 0 || r.Received != 0 {
		t.Fatalf("aborted %d, invalid %d %v, received %d; want 1, 0, 0", r.Aborted, r.Invalid, r.InvalidReasons, r.Received)
	}
}

func TestRunExpectAndJSON(t *testing.T) {
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "r.json")
	// Find a free port, then hand it to Run.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan Report, 1)
	var out bytes.Buffer
	go func() {
		r, err := Run(context.Background(), Config{Listen: addr, Expect: 10, JSONFile: jsonFile, Interval: 50 * time.Millisecond,
			Duration: 20 * time.Second}, &out)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	var conn net.Conn
	for i := 0; i < 100; i++ {
		if conn, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if conn == nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sw := newStreamWriter(t, conn)
	sw.preface()
	for i := int64(1); i <= 10; i++ {
		sw.packet(sw.copyFrames(testCopy("SCP", i, 3000)), time.Now(), false)
	}
	r := <-done
	if r.Unique != 10 {
		t.Errorf("unique %d", r.Unique)
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	var fromFile Report
	if err := json.Unmarshal(b, &fromFile); err != nil || fromFile.Unique != 10 || fromFile.PerNF["SCP"] != 10 {
		t.Errorf("json report %s (%v)", b, err)
	}
	if !strings.Contains(out.String(), "p99.9=") {
		t.Errorf("no final table:\n%s", out.String())
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Listen: "127.0.0.1:0", Mode: "udp"},
		{Mode: ModeHTTP2},
		{Listen: "127.0.0.1:0", TLSCert: "x"},
		{Listen: "127.0.0.1:0", TLSCert: "/nonexistent", TLSKey: "/nonexistent"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	var c Config
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-listen", ":9", "-mode", "http2", "-expect", "5", "-json", "x"}); err != nil ||
		c.Listen != ":9" || c.Mode != "http2" || c.Expect != 5 || c.JSONFile != "x" {
		t.Errorf("flags: %+v %v", c, err)
	}
}

func TestSeqTrack(t *testing.T) {
	var s seqTrack
	for _, n := range []int64{1, 3, 2, 2, 6, 5} {
		s.add(n)
	}
	if s.unique() != 5 || s.missing() != 1 || s.low != 3 {
		t.Errorf("unique %d missing %d low %d", s.unique(), s.missing(), s.low)
	}
	if s.add(3) || s.add(6) {
		t.Error("duplicates reported new")
	}
}

// BenchmarkSyntheticDecode feeds a pcap stream of 3000-byte copies through
// one connection decoder: ns/op is per copy.
func BenchmarkSyntheticDecode(b *testing.B) { benchSyntheticDecode(b, false) }

// BenchmarkSyntheticDecodeNewFlows: every copy on a flow of its own, as the
// synthetic sink writes them (ports from each copy's metadata).
func BenchmarkSyntheticDecodeNewFlows(b *testing.B) { benchSyntheticDecode(b, true) }

func benchSyntheticDecode(b *testing.B, newFlows bool) {
	const n = 4096
	var buf bytes.Buffer
	sw := newStreamWriter(b, &buf)
	sw.preface()
	hdr := buf.Len()
	var recs bytes.Buffer
	for i := int64(1); i <= n; i++ {
		if newFlows {
			sw.port = uint16(1024 + i)
		}
		sw.packet(sw.copyFrames(testCopy("SCP", i, 3000)), time.Now(), false)
	}
	recs.Write(buf.Bytes()[hdr:])
	perRec := recs.Len() / n
	b.SetBytes(int64(perRec))
	b.ReportAllocs()
	s := newStats(0, "")
	d := newConnDecoder(s)
	if err := d.readGlobal(bytes.NewReader(buf.Bytes())); err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(recs.Bytes())
	b.ResetTimer()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	for i := 0; i < b.N; i += n {
		r.Reset(recs.Bytes())
		m := min(n, b.N-i)
		for j := 0; j < m; j++ {
			now := time.Now()
			feedRecord(b, d, r, now.UnixNano()-int64(time.Millisecond), now)
		}
	}
	b.StopTimer()
	if rep := s.report(ModeSynthetic); rep.Invalid != 0 {
		b.Fatalf("invalid copies: %+v", rep)
	}
}

// feedRecord reads one pcap record from r and hands its packet to d, sent
// at ts and seen now.
func feedRecord(tb testing.TB, d *connDecoder, r io.Reader, ts int64, now time.Time) {
	if _, err := io.ReadFull(r, d.hdr[:]); err != nil {
		tb.Fatal(err)
	}
	l := int(d.order.Uint32(d.hdr[8:]))
	if cap(d.buf) < l {
		d.buf = make([]byte, l)
	}
	d.buf = d.buf[:l]
	if _, err := io.ReadFull(r, d.buf); err != nil {
		tb.Fatal(err)
	}
	d.packet(d.buf, ts, now)
}

// BenchmarkHTTP2Decode measures the per-copy cost of the HTTP/2 mode's
// record handling (decode + accounting).
func BenchmarkHTTP2Decode(b *testing.B) {
	p, err := New(Config{Listen: "127.0.0.1:0", Mode: ModeHTTP2})
	if err != nil {
		b.Fatal(err)
	}
	rec := nfcopy.AppendJSON(nil, testCopy("SCP", 1, 3000))
	var c nfcopy.Copy
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	now := time.Now()
	for b.Loop() {
		p.jsonCopy(&c, rec, now)
	}
}

// TestIgnoreRun checks that a warm-up run's copies stay out of every figure
// but Warmup, while other runs are counted as usual.
func TestIgnoreRun(t *testing.T) {
	tests := []struct {
		name                   string
		ignore                 string
		seqs                   []string
		wantWarm, wantUnique   int64
		wantLatency, wantPerNF int64
	}{
		{"no ignore", "", []string{"w1/SCP/1", "m1/SCP/1"}, 0, 2, 2, 2},
		{"warm-up ignored", "w1", []string{"w1/SCP/1", "w1/SCP/2", "m1/SCP/1"}, 2, 1, 1, 1},
		{"prefix of another run is not ignored", "w1", []string{"w11/SCP/1", "w1/NRF/1"}, 1, 1, 1, 1},
		{"copies without seq still counted", "w1", []string{"", "w1/SCP/1"}, 1, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStats(0, tt.ignore)
			now := time.Now()
			for _, q := range tt.seqs {
				s.copySeen(q, "SCP", 3000, 100, now.Add(-time.Millisecond).UnixNano(), now)
			}
			r := s.report(ModeSynthetic)
			if r.Warmup != tt.wantWarm || r.Unique != tt.wantUnique || r.Latency.Count != tt.wantLatency || r.PerNF["SCP"] != tt.wantPerNF {
				t.Fatalf("warm %d unique %d latency n %d per-NF SCP %d; want %d %d %d %d", r.Warmup, r.Unique, r.Latency.Count,
					r.PerNF["SCP"], tt.wantWarm, tt.wantUnique, tt.wantLatency, tt.wantPerNF)
			}
		})
	}
}

// TestFlowTable checks that a connection's flow table keeps a flow's state,
// stays within maxFlows, and gives a flow that was dropped (closed with FIN)
// a fresh HPACK decoder when its addresses open again.
func TestFlowTable(t *testing.T) {
	d := newConnDecoder(newStats(0, ""))
	key := func(i int) flowKey {
		var k flowKey
		k.sp, k.dp = uint16(i), uint16(i>>16)
		k.src[0], k.src[1] = byte(i>>8), byte(i>>24)
		return k
	}
	for i := range maxFlows + 100 {
		k := key(i)
		f := d.flow(k)
		if f == nil || f.dec == nil {
			t.Fatalf("flow %d: no state", i)
		}
		if d.flow(k) != f {
			t.Fatalf("flow %d: state not kept", i)
		}
		if i%7 == 0 { // closed
			dec := f.dec
			d.drop(k)
			if d.flow(k).dec == dec {
				t.Fatalf("flow %d: dropped flow kept its HPACK decoder", i)
			}
		}
		if len(d.flows) > maxFlows {
			t.Fatalf("flow table at %d flows, bound %d", len(d.flows), maxFlows)
		}
	}
}

// TestSyntheticEncoderStream reads what the synthetic encoder writes: flows
// opened with SYN and closed with FIN when its table is full, copies in
// MSS-sized segments (bodies of up to 200 KB), bare ACKs. Every copy must be
// received, none invalid.
func TestSyntheticEncoderStream(t *testing.T) {
	var batch []*nfcopy.Copy
	for i := range 300 {
		c := testCopy("SCP", int64(i+1), []int{300, 3000, 70_000, 200_000}[i%4])
		c.SourceIP, c.SourcePort, c.DestIP, c.DestPort = "10.0.0.1", uint16(40000+i%40), "10.0.0.2", 8080
		batch = append(batch, c)
	}
	r := probeBatch(t, synthetic.EncoderOptions{MaxFlows: 8}, batch)
	if r.Received != 300 || r.Unique != 300 || r.Invalid != 0 {
		t.Fatalf("received %d unique %d invalid %d %v (%v)", r.Received, r.Unique, r.Invalid, r.InvalidReasons, r.FirstErrors)
	}
}

// probeBatch writes batch as a synthetic stream with opts and reports what
// the probe's decoder makes of it.
func probeBatch(t *testing.T, opts synthetic.EncoderOptions, batch []*nfcopy.Copy) Report {
	t.Helper()
	var buf bytes.Buffer
	if err := synthetic.NewWriter(&buf, opts).WriteBatch(batch); err != nil {
		t.Fatal(err)
	}
	s := newStats(0, "")
	if err := newConnDecoder(s).run(&buf); err != nil {
		t.Fatal(err)
	}
	return s.report(ModeSynthetic)
}
