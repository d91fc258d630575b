package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestXDRSearchPcap: NF traffic through an xdr feed is stored as records; a
// search's pcap (GET /api/v1/xdrs/pcap) holds every copy of the matching
// transactions and nothing else, each transaction on flows of its own, and
// stock tshark decodes all of it. A search that matches too much, one that
// matches nothing and a parameter the pcap does not take get clear errors;
// the download is audited.
func TestXDRSearchPcap(t *testing.T) {
	t.Parallel()
	tshark := testkit.Tool(t, "tshark")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	createFeed(t, s, `{"name":"tx","type":"xdr","sources":["SCP","NRF","SEPP"],"topic":"XDR","xdr":{"timeout":"2s","linger":"100ms"}}`)
	produceCopies(t, ctx, s.KafkaAddrs(), "xpcap", 2000, 6000)

	// The failures by one cause: a few dozen transactions.
	type hop struct {
		NFType    string `json:"nf_type"`
		Direction string `json:"direction"`
	}
	var found struct {
		Records []struct {
			CorrelationID string `json:"correlation_id"`
			Cause         string
			Copies        int
			Duplicates    int
			Hops          []hop
		}
	}
	search := "cause=USER_NOT_FOUND&since=-10m"
	testkit.WaitForState(t, 30*time.Second, "records of USER_NOT_FOUND", func() (bool, string) {
		code, b := apiDo(t, s, "GET", "/api/v1/xdrs?limit=1000&"+search, "")
		if err := json.Unmarshal(b, &found); code != 200 || err != nil || len(found.Records) < 3 {
			return false, fmt.Sprintf("%d %.200s", code, b)
		}
		return true, ""
	})
	time.Sleep(3 * time.Second) // the transactions still open time out (2 s) and are stored
	code, b := apiDo(t, s, "GET", "/api/v1/xdrs?limit=1000&"+search, "")
	if err := json.Unmarshal(b, &found); code != 200 || err != nil {
		t.Fatalf("search: %d %.300s", code, b)
	}
	copies := 0
	for _, r := range found.Records {
		copies += r.Copies + r.Duplicates
	}

	req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/api/v1/xdrs/pcap?"+search, nil)
	req.Header.Set("Authorization", "Bearer "+s.AdminToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(t.TempDir(), "search.pcap")
	f, _ := os.Create(pcap)
	_, err = f.ReadFrom(resp.Body)
	resp.Body.Close()
	f.Close()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.tcpdump.pcap" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "signalbox-xdrs-") {
		b, _ := os.ReadFile(pcap)
		t.Fatalf("pcap of the search: %d %v %v %.300s", resp.StatusCode, resp.Header, err, b)
	}

	// Every HEADERS frame decoded: one per copy; each TCP stream belongs to
	// one transaction (client port 10000 + its place among the matches).
	out, err := exec.Command(tshark, "-r", pcap, "-n", "-Y", "http2.type == 1", "-T", "fields", "-E", "occurrence=f",
		"-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "http2.headers.status").Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	frames, streamPort, ports, notFound := 0, map[string]int{}, map[int]bool{}, 0
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		fs := strings.Split(line, "\t")
		if len(fs) != 4 {
			t.Fatalf("tshark line %q", line)
		}
		frames++
		src, _ := strconv.Atoi(fs[1])
		dst, _ := strconv.Atoi(fs[2])
		port := src
		if dst >= 10000 && dst < 10000+len(found.Records) {
			port = dst // a response
		}
		if port < 10000 || port >= 10000+len(found.Records) {
			t.Errorf("a copy on %s -> %s: not a transaction's port (10000..%d)", fs[1], fs[2], 10000+len(found.Records)-1)
		}
		if p, ok := streamPort[fs[0]]; ok && p != port {
			t.Errorf("tcp.stream %s carries transactions %d and %d", fs[0], p-10000, port-10000)
		}
		streamPort[fs[0]] = port
		ports[port] = true
		if fs[3] == "404" {
			notFound++
		}
	}
	t.Logf("%d transactions, %d copies in their records; the pcap: %d HEADERS frames on %d TCP streams, %d answers 404",
		len(found.Records), copies, frames, len(streamPort), notFound)
	if frames != copies {
		t.Errorf("the pcap holds %d copies; the records joined %d", frames, copies)
	}
	if len(ports) != len(found.Records) {
		t.Errorf("copies of %d transactions in the pcap, want %d", len(ports), len(found.Records))
	}
	if notFound < len(found.Records) {
		t.Errorf("%d answers 404 USER_NOT_FOUND in the pcap, want one per transaction (%d) at least", notFound, len(found.Records))
	}
	if flags, err := exec.Command(tshark, "-r", pcap, "-n", "-Y", "tcp.analysis.flags", "-T", "fields", "-e", "frame.number").Output(); err != nil || len(strings.TrimSpace(string(flags))) > 0 {
		t.Errorf("tshark's TCP analysis flags packets: %v %.200s", err, flags)
	}

	// Errors: too many, none, a parameter it does not take, a viewer.
	if code, b := apiDo(t, s, "GET", "/api/v1/xdrs/pcap?since=-10m", ""); code != 400 || !strings.Contains(string(b), "more than 500 transactions") {
		t.Errorf("a search of every transaction: %d %.300s", code, b)
	}
	if code, b := apiDo(t, s, "GET", "/api/v1/xdrs/pcap?supi=imsi-001010000000000", ""); code != 404 || !strings.Contains(string(b), "no stored transaction record matches") {
		t.Errorf("a search of nobody: %d %.300s", code, b)
	}
	if code, b := apiDo(t, s, "GET", "/api/v1/xdrs/pcap?"+search+"&limit=5", ""); code != 400 || !strings.Contains(string(b), "limit: unknown parameter") {
		t.Errorf("limit on a pcap: %d %.300s", code, b)
	}
	code, b = apiDo(t, s, "GET", "/api/v1/audit?since=-1h&resource=xdrs", "")
	if code != 200 || !strings.Contains(string(b), "download pcap of a search") || !strings.Contains(string(b), "USER_NOT_FOUND") {
		t.Errorf("audit of the download: %d %.500s", code, b)
	}
}
