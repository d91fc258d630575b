package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/testkit"
)

// Every CURRI decision is a call record on the CALLS topic: librdkafka's
// kcat reads them there, an HTTP/2 feed with a filter over call fields
// delivers only the rate-limited denials to a SIEM (a real h2c server),
// and a file feed writes all of them as JSON lines.
func TestCallRecordsStreamThroughTheDirector(t *testing.T) {
	t.Parallel()
	kcat := testkit.Tool(t, "kcat")
	cfg := testConfig(t, t.TempDir(), true)
	cfg.CallsTopic = "CALLS"
	cfg.NodeName = "sb-test"
	s := startServer(t, cfg)
	defer s.Shutdown()

	// The SIEM: an HTTP/2 cleartext server that keeps what it is sent.
	var (
		mu   sync.Mutex
		siem []callrecord.Record
	)
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var c callrecord.Record
		if err := callrecord.Decode(b, &c); err != nil || r.ProtoMajor != 2 {
			t.Errorf("SIEM got %s over HTTP/%d: %v", b, r.ProtoMajor, err)
		}
		mu.Lock()
		siem = append(siem, c)
		mu.Unlock()
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	lake := t.TempDir()
	createFeed(t, s, `{"name":"siem","type":"http2","sources":["CALLS"],"url":"http://`+ln.Addr().String()+`/calls",`+
		`"filter":"decision == \"deny\" && step == \"rate_limit\""}`)
	createFeed(t, s, `{"name":"lake","type":"file","sources":["CALLS"],"file":{"dir":"`+lake+`","rotate_seconds":1}}`)
	// What a feed of call records cannot be.
	for spec, want := range map[string]string{
		`{"name":"x","type":"synthetic","sources":["CALLS"],"endpoint":"127.0.0.1:9"}`:                 "http2, kafka or file",
		`{"name":"x","type":"kafka","sources":["CALLS","SCP"],"topic":"OUT"}`:                          "no other source",
		`{"name":"x","type":"http2","sources":["CALLS"],"url":"http://h/","filter":"status >= 400"}`:   "unknown name status",
		`{"name":"x","type":"kafka","sources":["SCP"],"topic":"CALLS"}`:                                "would loop",
		`{"name":"x","type":"file","sources":["CALLS"],"file":{"dir":"` + lake + `","format":"pcap"}}`: "jsonl",
		`{"name":"x","type":"file","sources":["CALLS"],"file":{"dir":"/proc/nope/calls"}}`:             "cannot create the directory: mkdir /proc/nope",
	} {
		if code, b := apiDo(t, s, "POST", "/api/v1/feeds", spec); code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("POST %s: %d %s, want 400 with %q", spec, code, b, want)
		}
	}
	// A feed made through the API starts at the topic's end as it was when
	// it was made (Prepare), so the calls below all reach it.

	// Calls: one caller over a limit of 2 a minute (2 permitted, 3 denied
	// by the limit), a blocked caller, and an unknown policy.
	if code, b := apiDo(t, s, "PUT", "/api/v1/policies/default", `{"name":"Default","default_action":{"decision":"permit"},`+
		`"rate_limit":{"per_calling":{"calls":2,"window_seconds":60}}}`); code != 200 {
		t.Fatalf("policy: %d %s", code, b)
	}
	if code, b := apiDo(t, s, "POST", "/api/v1/policies/default/lists/block/entries", `{"calling":"9725550199"}`); code != 201 {
		t.Fatalf("block: %d %s", code, b)
	}
	cucm := dialCUCM(t, s.CURRIAddr())
	testkit.WaitFor(t, 10*time.Second, "block list live", func() bool {
		_, body := cucm.do("POST", "/curri/default", xacmlRequest("9725550199", "5000"))
		return decisionOf(t, body) == "Deny"
	})
	for range 5 {
		cucm.do("POST", "/curri/default", xacmlRequest("9725550101", "5000"))
	}
	cucm.do("POST", "/curri/nosuch", xacmlRequest("9725550102", "5000"))

	// kcat reads the topic as any Kafka consumer would.
	var recs []callrecord.Record
	testkit.WaitForState(t, 15*time.Second, "call records on CALLS", func() (bool, string) {
		out, err := exec.Command(kcat, "-C", "-b", s.KafkaAddrs()[0], "-t", "CALLS", "-o", "beginning", "-e", "-q",
			"-f", "%k\t%s\n").Output()
		if err != nil {
			return false, err.Error()
		}
		recs = recs[:0]
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			key, val, _ := strings.Cut(sc.Text(), "\t")
			var c callrecord.Record
			if err := callrecord.Decode([]byte(val), &c); err != nil {
				t.Fatalf("not a call record: %v: %s", err, val)
			}
			if key != c.Calling {
				t.Errorf("key %q for calling %q", key, c.Calling)
			}
			recs = append(recs, c)
		}
		return len(recs) >= 7, fmt.Sprintf("%d records", len(recs))
	})
	count := map[string]int{}
	for _, c := range recs {
		if c.Version != callrecord.Version || c.Node != "sb-test" || c.Time.IsZero() || c.Client == "" || c.TransformedCalled != "+15000" {
			t.Errorf("record %+v", c)
		}
		count[c.Calling+" "+c.Decision+" "+c.Step]++
	}
	for k, want := range map[string]int{
		"9725550101 permit default": 2, "9725550101 deny rate_limit": 3, "9725550102 indeterminate ": 1,
	} {
		if count[k] != want {
			t.Errorf("%d records of %q, want %d (all: %v)", count[k], k, want, count)
		}
	}
	if count["9725550199 deny block_list"] < 1 {
		t.Errorf("no record of the blocked caller: %v", count)
	}

	// The SIEM gets the three rate-limited denials, and nothing else.
	testkit.WaitForState(t, 15*time.Second, "the SIEM's denials", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(siem) >= 3, fmt.Sprintf("%d records", len(siem))
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	for _, c := range siem {
		if c.Decision != "deny" || c.Step != "rate_limit" || c.Calling != "9725550101" || c.Sent == "" {
			t.Errorf("SIEM got %+v", c)
		}
	}
	if len(siem) != 3 {
		t.Errorf("SIEM got %d records, want 3", len(siem))
	}
	mu.Unlock()

	// The data lake has every record, as JSON lines, in finished files.
	testkit.WaitForState(t, 15*time.Second, "the lake's lines", func() (bool, string) {
		lines := 0
		files, _ := filepath.Glob(filepath.Join(lake, "lake-*.jsonl"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if l == "" {
					continue
				}
				var c callrecord.Record
				if err := json.Unmarshal([]byte(l), &c); err != nil || c.Decision == "" {
					t.Fatalf("%s: %v: %s", f, err, l)
				}
				lines++
			}
		}
		return lines == len(recs), fmt.Sprintf("%d lines in %d files, want %d", lines, len(files), len(recs))
	})

	// The console's live view reads the topic's newest records.
	code, b := apiDo(t, s, "GET", "/api/v1/calls/stream?limit=3", "")
	var live struct{ Records []callrecord.Record }
	if err := json.Unmarshal(b, &live); code != 200 || err != nil || len(live.Records) != 3 {
		t.Fatalf("calls/stream: %d %s", code, b)
	}
	for i := 1; i < len(live.Records); i++ {
		if live.Records[i].Time.After(live.Records[i-1].Time) {
			t.Errorf("calls/stream not newest first: %s", b)
		}
	}
	if live.Records[0].Calling != "9725550102" { // the last call made
		t.Errorf("newest record %+v", live.Records[0])
	}

	_, metrics := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{fmt.Sprintf("signalbox_calls_stream_produced_total %d", len(recs)),
		"signalbox_calls_stream_dropped_total 0", "signalbox_calls_stream_failed_total 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
