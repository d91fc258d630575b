package ingest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

func TestIngest(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{MaxMessageBytes: 64 << 10, Topics: testTopics})
	cc := b.ClientConfig()
	cc.MaxMessageBytes = 1 << 20 // let the broker, not the client, refuse big copies
	cl, err := cc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := prometheus.NewRegistry()
	srv, hc := h2cServer(t, NewHandler(cl, Config{Topics: testTopics, MaxBodyBytes: 512 << 10, Registerer: reg}))

	pad := make([]byte, 150<<10)
	rand.Read(pad)
	big := nfcopy.AppendJSON(nil, &nfcopy.Copy{Version: "1.0.0", CorrelationID: "big", Timestamp: 1678705695995010066, Direction: nfcopy.RequestIngress, NFType: "SCP",
		Headers: []nfcopy.Header{{Name: ":method", Values: []string{"POST"}}, {Name: ":path", Values: []string{"/x"}}},
		Body:    []byte(base64.StdEncoding.EncodeToString(pad)[:100<<10])})
	nd := func(lines ...[]byte) string { return string(bytes.Join(lines, []byte("\n"))) + "\n" }
	tests := []struct {
		name     string
		ct       string
		body     string
		code     int
		accepted int
		line     int
		field    string
	}{
		{"one json copy", "application/json", string(fixture.Record("j-1", "SCP", nfcopy.RequestIngress)), 200, 1, 0, ""},
		{"ndjson batch", "application/x-ndjson", nd(fixture.Record("n-1", "SCP", nfcopy.RequestIngress), fixture.Record("n-2", "NRF", nfcopy.ResponseEgress), fixture.Record("n-3", "SCP", nfcopy.RequestEgress)), 200, 3, 0, ""},
		{"bad line rejects batch", "application/x-ndjson", nd(fixture.Record("b-1", "SCP", nfcopy.RequestIngress), []byte(`{"version":`), fixture.Record("b-3", "SCP", nfcopy.RequestIngress)), 400, 0, 2, ""},
		{"missing field named", "application/json", `{"version":"1.0.0","metadata-list":{"timestamp":"1678705695995010066","message-direction":"REQUEST_INGRESS"},"header-list":{":method":["GET"],":path":["/"]}}`, 400, 0, 1, "metadata-list.feed-source.nf-type"},
		{"nf type without a topic, no third-party topic", "application/x-ndjson", nd(fixture.Record("u-1", "SCP", nfcopy.RequestIngress), fixture.Record("u-2", "AMF", nfcopy.RequestIngress)), 400, 0, 2, "metadata-list.feed-source.nf-type"},
		{"empty", "application/x-ndjson", "\n\n", 400, 0, 0, ""},
		{"wrong content type", "text/plain", "x", 415, 0, 0, ""},
		{"body too large", "application/x-ndjson", strings.Repeat(string(fixture.Record("l", "SCP", nfcopy.RequestIngress))+"\n", 2000), 413, 0, 0, ""},
		{"record too large for broker", "application/json", string(big), 413, 0, 0, ""},
	}
	adm := kadm.NewClient(cl)
	ends := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lo, err := adm.ListEndOffsets(ctx, "SCP", "NRF")
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		lo.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return sum
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ends()
			resp, err := hc.Post(srv.URL+"/v1/copies", tt.ct, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.ProtoMajor != 2 {
				t.Errorf("served over %s, want HTTP/2", resp.Proto)
			}
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, raw, tt.code)
			}
			var out struct {
				Accepted int    `json:"accepted"`
				Error    string `json:"error"`
				Line     int    `json:"line"`
				Field    string `json:"field"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("answer %q: %v", raw, err)
			}
			if out.Accepted != tt.accepted || out.Line != tt.line || (tt.field != "" && out.Field != tt.field) {
				t.Errorf("answer %s", raw)
			}
			if tt.code != 200 && out.Error == "" {
				t.Errorf("error answer without a message: %s", raw)
			}
			if got := ends() - before; got != int64(tt.accepted) {
				t.Errorf("%d copies reached Kafka, want %d", got, tt.accepted)
			}
		})
	}
	if n, err := testutil.GatherAndCount(reg, "signalbox_ingest_copies_total", "signalbox_ingest_rejected_total"); err != nil || n != 5 {
		t.Errorf("ingest metric series = %d (%v), want 5 (SCP, NRF, 400, 413, 415)", n, err)
	}
}

var testTopics = []broker.TopicSpec{{Name: "SCP", Partitions: 4}, {Name: "NRF", Partitions: 2}, {Name: broker.DLQTopic, Partitions: 1}}

// A copy of an NF type without a topic of its own goes to the third-party
// topic (the reference's NON_ORACLE).
func TestIngestThirdParty(t *testing.T) {
	body := string(fixture.Record("tp-1", "AMF", nfcopy.RequestIngress)) + "\n" + string(fixture.Record("tp-2", "non_oracle", nfcopy.RequestIngress)) + "\n" +
		string(fixture.Record("tp-3", "SCP", nfcopy.RequestIngress)) + "\n"
	n := ingestCounts(t, broker.ThirdPartyTopic, body)
	if n[broker.ThirdPartyTopic] != 2 || n["SCP"] != 1 {
		t.Errorf("end offsets %v, want 2 in %s (AMF and NON_ORACLE) and 1 in SCP", n, broker.ThirdPartyTopic)
	}
}

// ingestCounts posts body to an ingest whose topics are testTopics and
// extra, and returns how many records extra and SCP then hold.
func ingestCounts(t *testing.T, extra, body string) map[string]int64 {
	t.Helper()
	topics := append(slices.Clone(testTopics), broker.TopicSpec{Name: extra, Partitions: 2})
	b := kafkatest.StartBroker(t, broker.Config{Topics: topics})
	cl, err := b.ClientConfig().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	srv := httptest.NewServer(NewHandler(cl, Config{Topics: topics}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/copies", "application/x-ndjson", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, extra, "SCP")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int64{}
	lo.Each(func(o kadm.ListedOffset) { n[o.Topic] += o.Offset })
	return n
}

// TestIngestDiameter: a Diameter copy goes to the DIAMETER topic whatever
// its NF type (a DRA's, an HSS's), an SBI copy to its NF type's.
func TestIngestDiameter(t *testing.T) {
	tx, err := nfsim.NewDiameterGen(1).Next(time.Now().UnixNano(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	hss := strings.Replace(string(tx.Answer), `"nf-type":"DRA"`, `"nf-type":"SCP"`, 1)
	body := string(tx.Request) + "\n" + hss + "\n" + string(fixture.Record("sbi-1", "SCP", nfcopy.RequestIngress)) + "\n"
	n := ingestCounts(t, broker.DiameterTopic, body)
	if n[broker.DiameterTopic] != 2 || n["SCP"] != 1 {
		t.Errorf("end offsets %v, want 2 in %s and 1 in SCP", n, broker.DiameterTopic)
	}
}

// TestIngestBoundsBodiesInFlight: the bodies of requests read at once,
// multiplexed on one HTTP/2 connection, hold at most MaxInFlightBytes; a
// request past it is answered 503 with Retry-After and nothing read, and
// is taken once the others are done.
func TestIngestBoundsBodiesInFlight(t *testing.T) {
	b := kafkatest.StartBroker(t, broker.Config{Topics: testTopics})
	cl, err := b.ClientConfig().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := prometheus.NewRegistry()
	srv, hc := h2cServer(t, NewHandler(cl, Config{Topics: testTopics, MaxBodyBytes: 1 << 20, MaxInFlightBytes: 1 << 20, Registerer: reg}))
	line := nfcopy.AppendJSON(nil, &nfcopy.Copy{Version: "1.0.0", CorrelationID: "c1", Timestamp: 1678705695995010066, Direction: nfcopy.RequestIngress, NFType: "SCP",
		Headers: []nfcopy.Header{{Name: ":method", Values: []string{"POST"}}, {Name: ":path", Values: []string{"/x"}}}})
	post := func(body io.Reader, length int64) (int, string, http.Header) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/copies", body)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.ContentLength = length
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	held := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "signalbox_ingest_body_bytes_in_flight" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	// A slow request of 700 KiB, of which 600 KiB have come (one with no
	// length, which takes the budget as it comes: 1 MiB by then).
	pr, pw := io.Pipe()
	slow := make(chan int, 1)
	go func() { c, _, _ := post(pr, -1); slow <- c }()
	pw.Write(bytes.Repeat([]byte("\n"), 600<<10))
	deadline := time.Now().Add(5 * time.Second)
	for held() < 600<<10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Another of 600 KiB does not fit beside it.
	code, body, h := post(bytes.NewReader(append(bytes.Repeat([]byte("\n"), 600<<10-len(line)), line...)), 600<<10)
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, "as many request bodies as it may at once") {
		t.Errorf("beside 600 KiB in flight: %d %s %v", code, body, h)
	}
	pw.Write(append(bytes.Repeat([]byte("\n"), 100<<10), line...))
	pw.Close()
	if c := <-slow; c != 200 {
		t.Errorf("the slow request: %d", c)
	}
	// Done: the budget is free again.
	if code, body, _ := post(bytes.NewReader(append(bytes.Repeat([]byte("\n"), 600<<10-len(line)), line...)), 600<<10); code != 200 {
		t.Errorf("after the slow request: %d %s", code, body)
	}
}

// h2cServer serves h over h2c (HTTP/2 with prior knowledge, as NFs send)
// until the test ends, with a client that speaks it.
func h2cServer(t *testing.T, h http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return srv, &http.Client{Transport: tr, Timeout: 20 * time.Second}
}
