package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// TestExportAPI runs GET /export against a real director over the embedded
// broker: exactly the filtered copies of the range, as a download.
func TestExportAPI(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 2}, {Name: "NRF", Partitions: 1}}
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", Topics: topics}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	m, err := director.NewManager(director.Config{Client: b.ClientConfig(), Topics: topics, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: e.st, AdminToken: adminToken, Exporter: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	cl, err := b.ClientConfig().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 60 {
		nf := []string{"SCP", "NRF"}[i%2]
		d := nfcopy.RequestIngress
		if i%3 == 0 {
			d = nfcopy.ResponseEgress
		}
		c := &nfcopy.Copy{Version: "1.0.0", CorrelationID: fmt.Sprintf("x-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second).UnixNano(),
			Direction: d, NFType: nf, NFFQDN: "nf1", HopByHopID: "1", SourceIP: "10.0.0.1", DestIP: "10.0.0.2", SourcePort: 1000, DestPort: 80,
			Headers: []nfcopy.Header{{Name: ":method", Values: []string{"GET"}}, {Name: ":path", Values: []string{"/nnrf-disc/v1/nf-instances"}}}}
		recs = append(recs, &kgo.Record{Topic: nf, Timestamp: base.Add(time.Duration(i) * time.Second), Value: nfcopy.AppendJSON(nil, c)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	get := func(token string, q url.Values) (*http.Response, string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/export?"+q.Encode(), nil)
		r.Header.Set("Authorization", "Bearer "+token)
		res, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	// Seconds 10..39, SCP only (even i), requests only (i%3 != 0).
	q := url.Values{"since": {base.Add(10 * time.Second).Format(time.RFC3339)}, "until": {fmt.Sprint(base.Add(40 * time.Second).UnixMilli())},
		"sources": {"SCP"}, "filter": {`direction == "REQUEST_INGRESS"`}, "format": {"jsonl"}}
	res, body := get(adminToken, q)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), `attachment; filename="signalbox-export-`) {
		t.Fatalf("status %d headers %v body %s", res.StatusCode, res.Header, body)
	}
	got := map[string]bool{}
	var c nfcopy.Copy
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if err := nfcopy.Decode([]byte(l), &c); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got[c.CorrelationID] = true
	}
	want := 0
	for i := 10; i < 40; i++ {
		in := i%2 == 0 && i%3 != 0
		if in {
			want++
		}
		if got[fmt.Sprintf("x-%d", i)] != in {
			t.Errorf("x-%d exported=%v", i, !in)
		}
	}
	if len(got) != want {
		t.Errorf("%d copies, want %d", len(got), want)
	}

	// A relative time, as the other searches take it: the same as the
	// time it stands for.
	rel, relBody := get(adminToken, url.Values{"since": {"-15m"}, "sources": {"SCP"}, "format": {"jsonl"}})
	_, absBody := get(adminToken, url.Values{"since": {time.Now().Add(-15 * time.Minute).Format(time.RFC3339)}, "sources": {"SCP"}, "format": {"jsonl"}})
	if n := strings.Count(relBody, "\n"); rel.StatusCode != 200 || n == 0 || n != strings.Count(absBody, "\n") {
		t.Errorf("since=-15m: status %d, %d lines; since 15 minutes ago as RFC 3339: %d lines", rel.StatusCode, n, strings.Count(absBody, "\n"))
	}

	// pcap: a download starting with the pcap magic.
	q.Set("format", "pcap")
	res, body = get(adminToken, q)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/vnd.tcpdump.pcap" || len(body) < 24 || body[:4] != "\x4d\x3c\xb2\xa1" {
		t.Errorf("pcap: status %d type %s %d bytes", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}

	for _, c := range []struct {
		q     url.Values
		field string
	}{
		{url.Values{"filter": {"status =="}}, "filter"},
		{url.Values{"format": {"csv"}}, "format"},
		{url.Values{"sources": {"AMF"}}, "sources[0]"},
		{url.Values{"since": {"yesterday"}}, "since"},
	} {
		res, body := get(adminToken, c.q)
		if res.StatusCode != 400 || !strings.Contains(body, `"field":"`+c.field+`"`) {
			t.Errorf("%v: %d %s, want 400 on %s", c.q, res.StatusCode, body, c.field)
		}
	}
	if res, _ := get("wrong", url.Values{}); res.StatusCode != 401 {
		t.Errorf("bad token: %d", res.StatusCode)
	}

	// Retention moved the NRF log start: a range from before it is gone.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "NRF", Partition: 0, At: 5})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, offs); err != nil {
		t.Fatal(err)
	}
	res, body = get(adminToken, url.Values{"since": {base.Format(time.RFC3339)}})
	if res.StatusCode != http.StatusGone || !strings.Contains(body, "retention") {
		t.Errorf("deleted range: %d %s, want 410", res.StatusCode, body)
	}
}
