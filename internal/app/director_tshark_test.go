package app

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestDirectorStreamInStockTshark: copies as NFs write them — https on port
// 443, responses without x-http2-stream-id (Netty drops it), consumers
// named only by 3gpp-Sbi-NF-Peer-Info — go through serve to a synthetic
// feed; the stream the probe saved decodes in an unmodified tshark with no
// "decode as": every copy as HTTP/2, each response on its request's stream,
// and no TCP or HTTP/2 expert warning.
func TestDirectorStreamInStockTshark(t *testing.T) {
	t.Parallel()
	kcat := testkit.Tool(t, "kcat")
	tshark := testkit.Tool(t, "tshark")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	p, pcap := startPCAPProbe(t, ctx)
	createFeed(t, s, `{"name":"wire","type":"synthetic","sources":["SCP"],"endpoint":"`+p.Addr()+`","start":"earliest"}`)

	const n = 200
	var lines []string
	for i := range n {
		lines = append(lines, sbiPair(fmt.Sprintf("ts-%d", i), i, i%2 == 1, int64(1678705695995010066)+int64(i)*1_000_000)...)
	}
	kcatProduce(t, kcat, s, lines, "-z", "gzip", "-p", "0") // one partition: requests before responses
	testkit.WaitForState(t, 30*time.Second, "copies at the probe", func() (bool, string) {
		r := p.Snapshot()
		return r.Received >= 2*n, probeState(p)
	})
	if r := p.Snapshot(); r.Invalid != 0 {
		t.Fatalf("probe: %s", probeState(p))
	}
	cancel()
	p.Close()

	out, err := exec.Command(tshark, "-r", pcap, "-n", "-Y", "http2.type == 1", "-T", "fields", "-E", "occurrence=f",
		"-e", "tcp.stream", "-e", "http2.streamid", "-e", "http2.headers.method", "-e", "http2.headers.status", "-z", "expert,note").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	requests, responses := map[string]bool{}, 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			if l := strings.ToLower(line); strings.Contains(l, "warn") || strings.Contains(l, "error") || strings.Contains(l, "malformed") {
				t.Errorf("tshark: %s", line)
			}
			continue
		}
		key := f[0] + "/" + f[1] // TCP stream and HTTP/2 stream
		switch {
		case f[2] != "":
			requests[key] = true
		case f[3] != "":
			responses++
			if !requests[key] {
				t.Errorf("response on TCP stream %s, HTTP/2 stream %s, where no request was", f[0], f[1])
			}
		}
	}
	if len(requests) != n || responses != n {
		t.Errorf("tshark decoded %d requests and %d responses as HTTP/2, want %d each (no -d given)", len(requests), responses, n)
	}
}

// startPCAPProbe starts a synthetic-stream probe that saves what it
// receives to a pcap file, for tshark to read once the probe is closed.
func startPCAPProbe(t *testing.T, ctx context.Context) (*probe.Probe, string) {
	t.Helper()
	pcap := filepath.Join(t.TempDir(), "feed.pcap")
	p, err := probe.New(probe.Config{Listen: "127.0.0.1:0", Mode: probe.ModeSynthetic, PCAPFile: pcap})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, pcap
}

// TestFileFeedPcapNamesNFsByMappings: a pcap file feed names the NFs whose
// copies carry no addresses by the feed's mappings, as a synthetic feed's
// stream does, and tshark reads the finished file with those addresses. A
// mapping that is not ip:port is refused when the feed is created, naming
// the field. (The mappings of a file feed were once accepted and ignored.)
func TestFileFeedPcapNamesNFsByMappings(t *testing.T) {
	t.Parallel()
	kcat := testkit.Tool(t, "kcat")
	tshark := testkit.Tool(t, "tshark")
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	dir := t.TempDir()
	feed := func(addr string) string {
		return `{"name":"export","type":"file","sources":["SCP"],"start":"earliest",` +
			`"file":{"dir":"` + dir + `","format":"pcap","rotate_seconds":1},` +
			`"mappings":[{"nf_fqdn":"scp1.example","addr":"` + addr + `"}]}`
	}
	if code, b := apiDo(t, s, "POST", "/api/v1/feeds", feed("scp1.example:8080")); code != 400 || !strings.Contains(string(b), `"mappings[0].addr"`) {
		t.Fatalf("a mapping to a host name: %d %s, want 400 naming mappings[0].addr", code, b)
	}
	createFeed(t, s, feed("192.0.2.77:8080"))

	const n = 50
	var lines []string
	for i := range n {
		meta := func(dir string) string { // no addresses: the mapping names the SCP
			return `"metadata-list":{"correlation-id":"map-` + strconv.Itoa(i) + `","hop-by-hop-id":"1","timestamp":"` +
				strconv.FormatInt(time.Now().UnixNano(), 10) + `","message-direction":"` + dir +
				`","feed-source":{"nf-type":"SCP","nf-fqdn":"scp1.example","nf-instance-id":"scp-1"}}`
		}
		lines = append(lines,
			`{"version":"1.0.0",`+meta("REQUEST_INGRESS")+`,"header-list":{":method":["GET"],":scheme":["http"],`+
				`":authority":["nrf1.example:8080"],":path":["/nnrf-disc/v1/nf-instances"]}}`,
			`{"version":"1.0.0",`+meta("RESPONSE_EGRESS")+`,"header-list":{":status":["200"]},"5g-sbi-message":"{}"}`)
	}
	kcatProduce(t, kcat, s, lines, "-p", "0")
	testkit.WaitForState(t, 30*time.Second, "the feed to write every copy", func() (bool, string) {
		st, b := feedStatus(t, s, "export")
		return st.Delivered == 2*n, b
	})
	var files []string
	testkit.WaitFor(t, 10*time.Second, "the files to be finished (rotated into place)", func() bool {
		writing, _ := filepath.Glob(filepath.Join(dir, ".export*"))
		files, _ = filepath.Glob(filepath.Join(dir, "export*.pcap"))
		return len(writing) == 0 && len(files) > 0
	})
	counts := map[string]int{}
	for _, f := range files {
		cmd := exec.Command(tshark, "-r", f, "-n", "-Y", "http2.type == 1", "-T", "fields", "-E", "occurrence=f",
			"-e", "ip.src", "-e", "ip.dst")
		var stderr strings.Builder
		cmd.Stderr = &stderr // its notes (running as root) are not addresses
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, stderr.String())
		}
		for _, line := range strings.Fields(string(out)) {
			counts[line]++
		}
	}
	if counts["192.0.2.77"] < 2*n {
		t.Fatalf("tshark: addresses of the HTTP/2 HEADERS frames %v: want the mapped SCP, 192.0.2.77, in each of the %d copies", counts, 2*n)
	}
}

// sbiPair is an AUSF-style request copy (generate-auth-data, on its NF's
// stream 2i+1) and its response copy, of correlation id id, stamped ts and
// ts+0.5 ms: with addresses in their metadata (addrs), or with the peers
// only in their SBI headers.
func sbiPair(id string, i int, addrs bool, ts int64) []string {
	cons := fmt.Sprintf("5480451%d-4191-46b3-955c-ac631f953ed8", i%20)
	meta := func(dir string, ts int64) string {
		m := `"metadata-list":{"correlation-id":"` + id + `","hop-by-hop-id":"1","timestamp":"` + strconv.FormatInt(ts, 10) +
			`","message-direction":"` + dir + `",`
		if addrs {
			m += `"destination-ip":"10.200.0.1","destination-port":443,`
		}
		return m + `"feed-source":{"nf-type":"SCP","nf-fqdn":"scp1.example","nf-instance-id":"scp-1"}}`
	}
	return []string{
		`{"version":"1.0.0",` + meta("REQUEST_INGRESS", ts) + `,"header-list":{":method":["POST"],":scheme":["https"],` +
			`":authority":["udm1.example:443"],":path":["/nudm-ueau/v1/suci-0-234-30/security-information/generate-auth-data"],` +
			`"3gpp-sbi-nf-peer-info":["srcinst=` + cons + `; dstinst=8a3a1c9e-0000-4000-8000-000000000002"],` +
			`"x-http2-stream-id":["` + strconv.Itoa(2*i+1) + `"],"content-type":["application/json"]},"5g-sbi-message":"{\"servingNetworkName\":\"5G:mnc030\"}"}`,
		`{"version":"1.0.0",` + meta("RESPONSE_EGRESS", ts+500_000) + `,"header-list":{":status":["200"],"content-type":["application/json"],` +
			`"3gpp-sbi-nf-peer-info":["srcinst=8a3a1c9e-0000-4000-8000-000000000002; dstinst=` + cons + `"]},"5g-sbi-message":"{\"authType\":\"5G_AKA\"}"}`,
	}
}
