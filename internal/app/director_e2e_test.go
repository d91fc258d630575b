package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/ports"
)

func startProbe(t *testing.T, ctx context.Context, mode string) *probe.Probe {
	t.Helper()
	p, err := probe.New(probe.Config{Listen: "127.0.0.1:0", Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func createFeed(t *testing.T, s *Server, spec string) {
	t.Helper()
	if code, b := apiDo(t, s, "POST", "/api/v1/feeds", spec); code != 201 {
		t.Fatalf("create feed %s: %d %s", spec, code, b)
	}
}

func produceCopies(t *testing.T, ctx context.Context, brokers []string, runID string, rate float64, count int64) nfsim.Stats {
	t.Helper()
	st, err := nfsim.Run(ctx, nfsim.Config{Brokers: brokers, Rate: rate, Count: count, Size: 1500, RunID: runID,
		Mix: map[string]float64{"SCP": 16, "NRF": 5, "SEPP": 9}}, io.Discard)
	if err != nil {
		t.Fatalf("nfsim: %v", err)
	}
	if st.Total() != count {
		t.Fatalf("nfsim sent %d of %d", st.Total(), count)
	}
	return st
}

// kafkaCounter consumes a kafka feed's output topic and counts copies by
// their x-signalbox-seq, as a third party reading the topic would.
type kafkaCounter struct {
	mu     sync.Mutex
	seen   map[string]int
	cl     *kgo.Client
	errors []string
}

func newKafkaCounter(t *testing.T, ctx context.Context, brokers []string, topic string) *kafkaCounter {
	// read_committed: what a consumer of an exactly-once feed reads (the
	// same as read_uncommitted for the others, which produce outside
	// transactions).
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	k := &kafkaCounter{seen: map[string]int{}, cl: cl}
	go func() {
		var c nfcopy.Copy
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				k.mu.Lock()
				defer k.mu.Unlock()
				if err := nfcopy.Decode(r.Value, &c); err != nil {
					var de *nfcopy.DecodeError
					if !errors.As(err, &de) || !de.Incomplete { // an incomplete copy is counted as relayed
						k.errors = append(k.errors, err.Error())
						return
					}
				}
				k.seen[c.Header("x-signalbox-seq")]++
			})
		}
	}()
	t.Cleanup(cl.Close)
	return k
}

// recordCounter reads an xdr feed's topic: one JSON record per transaction.
type recordCounter struct {
	mu      sync.Mutex
	ids     map[string]int
	results map[string]int
}

func newRecordCounter(t *testing.T, ctx context.Context, brokers []string, topic string, opts ...kgo.Opt) *recordCounter {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordCounter{ids: map[string]int{}, results: map[string]int{}}
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				var rec struct {
					CorrelationID string `json:"correlation_id"`
					Result        string `json:"result"`
				}
				rc.mu.Lock()
				defer rc.mu.Unlock()
				if json.Unmarshal(r.Value, &rec) != nil || rec.CorrelationID == "" {
					rc.results["undecodable"]++
					return
				}
				if rc.ids[rec.CorrelationID]++; rc.ids[rec.CorrelationID] == 1 {
					rc.results[rec.Result]++
				}
			})
		}
	}()
	t.Cleanup(cl.Close)
	return rc
}

// dups is how many records came more than once, by correlation id.
func (rc *recordCounter) dups() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, v := range rc.ids {
		n += v - 1
	}
	return n
}

func (rc *recordCounter) counts() (int, map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	res := map[string]int{}
	for k, v := range rc.results {
		res[k] = v
	}
	return len(rc.ids), res
}

func (k *kafkaCounter) counts(prefix string) (unique, dups int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for seq, n := range k.seen {
		if strings.HasPrefix(seq, prefix) {
			unique++
			dups += n - 1
		}
	}
	return
}

func probeState(p *probe.Probe) string {
	r := p.Snapshot()
	return fmt.Sprintf("received=%d unique=%d dups=%d missing=%d invalid=%d %v", r.Received, r.Unique, r.Duplicates, r.Missing, r.Invalid, r.FirstErrors)
}

// TestDirectorEndToEnd: the embedded broker, nfsim producing like NFs, one
// feed of each type, and third-party consumers (the probe as synthetic
// receiver and HTTP/2 server; a Kafka consumer of the kafka feed's topic).
// Every copy is delivered exactly once when nothing fails; none is lost
// when signalbox restarts mid-stream.
func TestDirectorEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	cfg := testConfig(t, dir, true)
	cfg.KafkaAddr = ports.Reserve(t, "127.0.0.1") // fixed, so producers reconnect across a restart
	s := startServer(t, cfg)
	defer func() { s.Shutdown() }()

	synth := startProbe(t, ctx, probe.ModeSynthetic)
	h2 := startProbe(t, ctx, probe.ModeHTTP2)
	createFeed(t, s, `{"name":"probe-a","type":"synthetic","sources":["SCP","NRF","SEPP"],"endpoint":"`+synth.Addr()+`"}`)
	createFeed(t, s, `{"name":"analytics","type":"http2","sources":["SCP","NRF","SEPP"],"url":"http://`+h2.Addr()+`/copies"}`)
	createFeed(t, s, `{"name":"lake","type":"kafka","sources":["SCP","NRF","SEPP"],"topic":"COPIES-OUT"}`)
	// A feed of one NF type and one direction gets only those.
	createFeed(t, s, `{"name":"sepp-in","type":"kafka","sources":["SEPP"],"directions":["REQUEST_INGRESS"],"topic":"SEPP-IN"}`)
	// A filtered feed, and a feed of transaction records (xDR).
	seppProbe := startProbe(t, ctx, probe.ModeSynthetic)
	createFeed(t, s, `{"name":"sepp-errors","type":"synthetic","sources":["SCP","NRF","SEPP"],"endpoint":"`+seppProbe.Addr()+`","filter":"nf_type == \"SEPP\""}`)
	createFeed(t, s, `{"name":"tx","type":"xdr","sources":["SCP","NRF","SEPP"],"topic":"XDR","xdr":{"timeout":"15s","linger":"200ms"}}`)
	xdrs := newRecordCounter(t, ctx, s.KafkaAddrs(), "XDR")
	// The same records, exactly once: across the restart below too.
	createFeed(t, s, `{"name":"tx-once","type":"xdr","sources":["SCP","NRF","SEPP"],"topic":"XDR-ONCE","exactly_once":true,"xdr":{"timeout":"15s","linger":"200ms"}}`)
	xdrOnce := newRecordCounter(t, ctx, s.KafkaAddrs(), "XDR-ONCE", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	xdrProbe := startProbe(t, ctx, probe.ModeHTTP2)
	createFeed(t, s, `{"name":"tx-h2","type":"xdr","sources":["SCP","NRF","SEPP"],"url":"http://`+xdrProbe.Addr()+`/records","xdr":{"timeout":"15s","linger":"200ms"}}`)
	lake := newKafkaCounter(t, ctx, s.KafkaAddrs(), "COPIES-OUT")
	seppIn := newKafkaCounter(t, ctx, s.KafkaAddrs(), "SEPP-IN")

	// Phase 1: nothing fails: exactly once everywhere.
	const n1 = 3000
	st := produceCopies(t, ctx, s.KafkaAddrs(), "p1", 1500, n1)
	for _, p := range []*probe.Probe{synth, h2} {
		testkit.WaitForState(t, 30*time.Second, "probe "+p.Snapshot().Mode, func() (bool, string) {
			r := p.Snapshot()
			return r.Unique >= n1, probeState(p)
		})
		r := p.Snapshot()
		if r.Unique != n1 || r.Duplicates != 0 || r.Missing != 0 || r.Invalid != 0 {
			t.Fatalf("%s: want exactly %d once: %s", r.Mode, n1, probeState(p))
		}
	}
	testkit.WaitForState(t, 30*time.Second, "kafka feed", func() (bool, string) {
		u, d := lake.counts("p1/")
		return u >= n1, fmt.Sprintf("unique=%d dups=%d", u, d)
	})
	if u, d := lake.counts("p1/"); u != n1 || d != 0 {
		t.Fatalf("kafka feed: unique=%d dups=%d, want %d once", u, d, n1)
	}
	seppCount := int(st.Sent["SEPP"]) / 2 // SEPP copies at REQUEST_INGRESS and RESPONSE_EGRESS
	testkit.WaitForState(t, 30*time.Second, "direction-filtered feed", func() (bool, string) {
		u, _ := seppIn.counts("p1/SEPP/")
		return u >= seppCount, fmt.Sprintf("unique=%d want %d", u, seppCount)
	})
	if u, _ := seppIn.counts("p1/"); u != seppCount {
		t.Fatalf("SEPP REQUEST_INGRESS feed got %d copies, want %d", u, seppCount)
	}

	// The filtered feed got exactly the SEPP copies; the xDR feed one
	// complete record per transaction (SCP copies at 4 points, others at 2).
	testkit.WaitForState(t, 30*time.Second, "filtered feed", func() (bool, string) {
		return seppProbe.Snapshot().Unique >= st.Sent["SEPP"], probeState(seppProbe)
	})
	if r := seppProbe.Snapshot(); r.Unique != st.Sent["SEPP"] || r.PerNF["SEPP"] != st.Sent["SEPP"] || r.Duplicates != 0 {
		t.Fatalf("filtered feed: %s per_nf=%v, want %d SEPP", probeState(seppProbe), r.PerNF, st.Sent["SEPP"])
	}
	wantTx := int(st.Sent["SCP"]/4 + st.Sent["NRF"]/2 + st.Sent["SEPP"]/2)
	testkit.WaitForState(t, 30*time.Second, "xdr feed", func() (bool, string) {
		n, results := xdrs.counts()
		return n >= wantTx, fmt.Sprintf("records=%d results=%v want %d", n, results, wantTx)
	})
	if n, results := xdrs.counts(); n != wantTx || results["complete"] != wantTx {
		t.Fatalf("xdr feed: %d records %v, want %d complete", n, results, wantTx)
	}
	testkit.WaitForState(t, 30*time.Second, "exactly-once xdr feed", func() (bool, string) {
		n, results := xdrOnce.counts()
		return n >= wantTx, fmt.Sprintf("records=%d results=%v want %d", n, results, wantTx)
	})
	if n, results := xdrOnce.counts(); n != wantTx || results["complete"] != wantTx || xdrOnce.dups() != 0 {
		t.Fatalf("exactly-once xdr feed: %d records %v, %d duplicates, want %d complete once", n, results, xdrOnce.dups(), wantTx)
	}
	// The same records over HTTP/2, validated by the probe.
	testkit.WaitForState(t, 30*time.Second, "xdr feed over http2", func() (bool, string) {
		r := xdrProbe.Snapshot()
		return r.Unique >= int64(wantTx), fmt.Sprintf("%s results=%v", probeState(xdrProbe), r.Records)
	})
	if r := xdrProbe.Snapshot(); r.Records["complete"] != int64(wantTx) || r.Invalid != 0 || r.Duplicates != 0 {
		t.Fatalf("probe on the xdr feed: %s results=%v, want %d complete", probeState(xdrProbe), r.Records, wantTx)
	}

	// The xdr feed's latest records are served for the console.
	code, b := apiDo(t, s, "GET", "/api/v1/feeds/tx/records?limit=5", "")
	var recent struct{ Records []map[string]any }
	if json.Unmarshal(b, &recent); code != 200 || len(recent.Records) != 5 || recent.Records[0]["correlation_id"] == nil {
		t.Fatalf("recent records: %d %s", code, b)
	}
	if code, b = apiDo(t, s, "GET", "/api/v1/feeds/probe-a/records", ""); code != 400 {
		t.Fatalf("records of a copy feed: %d %s", code, b)
	}

	// Feed status reflects the deliveries.
	code, b = apiDo(t, s, "GET", "/api/v1/feeds/probe-a/status", "")
	var fst struct {
		Status struct {
			State     string
			Delivered uint64
		}
	}
	json.Unmarshal(b, &fst)
	if code != 200 || fst.Status.Delivered < n1 || fst.Status.State != "connected" {
		t.Fatalf("status: %d %s", code, b)
	}

	// One-shot export from retention: exactly the filtered copies of the range.
	q := url.Values{}
	q.Set("format", "jsonl")
	q.Set("sources", "NRF,SEPP")
	q.Set("filter", `nf_type == "NRF" && header["x-signalbox-seq"] startsWith "p1/"`)
	q.Set("since", time.Now().Add(-10*time.Minute).UTC().Format(time.RFC3339))
	code, b = apiDo(t, s, "GET", "/api/v1/export?"+q.Encode(), "")
	if lines := strings.Count(string(b), "\n"); code != 200 || int64(lines) != st.Sent["NRF"] {
		t.Fatalf("export: %d, %d lines, want %d NRF copies", code, lines, st.Sent["NRF"])
	}
	q.Set("filter", "nf_type ==")
	if code, b = apiDo(t, s, "GET", "/api/v1/export?"+q.Encode(), ""); code != 400 {
		t.Fatalf("bad export filter: %d %s", code, b)
	}

	// The NF ingest rate is visible per topic, whoever produced.
	testkit.WaitForState(t, 10*time.Second, "topic copies metric", func() (bool, string) {
		_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
		want := fmt.Sprintf("signalbox_kafka_topic_copies_total{topic=\"SCP\"} %d", st.Sent["SCP"])
		return strings.Contains(m, want), want
	})

	// Phase 2: signalbox restarts while NFs keep producing; nothing is lost.
	const n2 = 6000
	prodDone := make(chan nfsim.Stats, 1)
	go func() { prodDone <- produceCopies(t, ctx, s.KafkaAddrs(), "p2", 1500, n2) }()
	time.Sleep(1500 * time.Millisecond)
	if err := s.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	s = startServer(t, cfg)
	st2 := <-prodDone
	for _, p := range []*probe.Probe{synth, h2} {
		testkit.WaitForState(t, 60*time.Second, "after restart "+p.Snapshot().Mode, func() (bool, string) {
			r := p.Snapshot()
			return r.Unique >= n1+n2 && r.Missing == 0, probeState(p)
		})
		if r := p.Snapshot(); r.Invalid != 0 {
			t.Fatalf("invalid records: %s", probeState(p))
		}
	}
	testkit.WaitForState(t, 60*time.Second, "kafka feed after restart", func() (bool, string) {
		u, d := lake.counts("p2/")
		return u == n2, fmt.Sprintf("unique=%d dups=%d", u, d)
	})
	if len(lake.errors) > 0 {
		t.Fatalf("undecodable copies in the kafka feed: %v", lake.errors[:1])
	}
	// The exactly-once xdr feed took its open transactions up from its
	// checkpoints: every transaction once, complete.
	wantTx += int(st2.Sent["SCP"]/4 + st2.Sent["NRF"]/2 + st2.Sent["SEPP"]/2)
	testkit.WaitForState(t, 60*time.Second, "exactly-once xdr feed after restart", func() (bool, string) {
		n, results := xdrOnce.counts()
		return n >= wantTx, fmt.Sprintf("records=%d results=%v dups=%d want %d", n, results, xdrOnce.dups(), wantTx)
	})
	time.Sleep(time.Second)
	if n, results := xdrOnce.counts(); n != wantTx || results["complete"] != wantTx || xdrOnce.dups() != 0 {
		t.Fatalf("exactly-once xdr feed after restart: %d records %v, %d duplicates, want %d complete once", n, results, xdrOnce.dups(), wantTx)
	}
}

// TestDirectorConsumerOutage: the synthetic consumer stops mid-stream
// until the feed reports the outage with copies waiting, and restarts on
// the same address; the feed reconnects and nothing is lost (duplicates
// allowed, counted).
func TestDirectorConsumerOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()

	synth := startProbe(t, ctx, probe.ModeSynthetic)
	createFeed(t, s, `{"name":"probe-b","type":"synthetic","sources":["SCP","NRF","SEPP"],"endpoint":"`+synth.Addr()+`"}`)

	const n = 8000
	prodDone := make(chan struct{})
	go func() { produceCopies(t, ctx, s.KafkaAddrs(), "out", 1000, n); close(prodDone) }()
	testkit.WaitForState(t, 30*time.Second, "copies to flow", func() (bool, string) {
		return synth.Snapshot().Unique >= 1000, probeState(synth)
	})
	synth.Close()
	// The outage as the feed reports it: not connected, with an error,
	// and copies piling up behind it.
	testkit.WaitForState(t, 30*time.Second, "the feed to report the outage with copies waiting", func() (bool, string) {
		st, b := feedStatus(t, s, "probe-b")
		return st.State != "connected" && st.Lag >= 1000, b
	})
	if err := synth.Start(ctx); err != nil {
		t.Fatalf("probe restart: %v", err)
	}
	<-prodDone
	testkit.WaitForState(t, 60*time.Second, "after outage", func() (bool, string) {
		r := synth.Snapshot()
		return r.Unique >= n && r.Missing == 0, probeState(synth)
	})
	if r := synth.Snapshot(); r.Unique != n || r.Invalid != 0 {
		t.Fatalf("after outage: %s", probeState(synth))
	}
	testkit.WaitForState(t, 10*time.Second, "feed reconnected", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/feeds/probe-b/status", "")
		return strings.Contains(string(b), `"state":"connected"`), string(b)
	})
}

// TestFeedReportsUnreachableConsumer: a synthetic feed to an endpoint where
// nothing listens says so at once, with no copy to send: its state is
// disconnected and its last_error names the endpoint and the refusal, within
// two seconds, and the feed_disconnected alarm follows. When the probe comes
// up, the feed reaches it (connected) still without a copy.
func TestFeedReportsUnreachableConsumer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testConfig(t, t.TempDir(), true)
	cfg.AlarmFeedDisconnect = time.Second
	s := startServer(t, cfg)
	defer s.Shutdown()
	// Reserved, below the ephemeral range (32768-60999 on Linux): dialled
	// again and again, a free port in it is sooner or later the dialling
	// socket's own, and the connection is to itself; and the probe binds
	// it later.
	addr := ports.Reserve(t, "127.0.0.1")
	createFeed(t, s, `{"name":"nobody","type":"synthetic","sources":["SCP"],"endpoint":"`+addr+`"}`)
	testkit.WaitForState(t, 2*time.Second, "the feed to report its consumer unreachable", func() (bool, string) {
		st, b := feedStatus(t, s, "nobody")
		return st.State == "disconnected" && strings.Contains(st.LastError, addr) &&
			strings.Contains(st.LastError, "connection refused"), b
	})
	testkit.WaitForState(t, 15*time.Second, "the feed_disconnected alarm", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/alarms", "")
		return strings.Contains(string(b), `"kind":"feed_disconnected"`) && strings.Contains(string(b), "feed nobody has not been connected"), string(b)
	})
	p, err := probe.New(probe.Config{Listen: addr, Mode: probe.ModeSynthetic})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	testkit.WaitForState(t, 20*time.Second, "the feed to reach the probe", func() (bool, string) {
		st, b := feedStatus(t, s, "nobody")
		return st.State == "connected" && st.Delivered == 0, b
	})
}

// feedState is what tests read of a feed's status.
type feedState struct {
	State     string `json:"state"`
	LastError string `json:"last_error"`
	Delivered uint64 `json:"delivered"`
	Lag       int64  `json:"lag"`
}

// feedStatus is feed name's status, and the answer as it came.
func feedStatus(t *testing.T, s *Server, name string) (feedState, string) {
	t.Helper()
	var st struct {
		Status feedState `json:"status"`
	}
	_, b := apiDo(t, s, "GET", "/api/v1/feeds/"+name+"/status", "")
	_ = json.Unmarshal(b, &st)
	return st.Status, string(b)
}

// TestXDRFeedToAnotherClusterChecked: an xdr feed producing its records to
// another Kafka cluster has that cluster checked as a kafka feed's is, when
// it is created (it was once accepted, and failed only when it started).
func TestXDRFeedToAnotherClusterChecked(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	for kafka, field := range map[string]string{
		`{"brokers":[]}`:     `"kafka.brokers"`,
		`{"brokers":["k1"]}`: `"kafka.brokers[0]"`,
		`{"brokers":["k1:9093"],"sasl_mechanism":"PLAIN"}`: `"kafka.username"`,
	} {
		spec := `{"name":"xdr-out","type":"xdr","sources":["SCP"],"topic":"records","kafka":` + kafka + `}`
		if code, b := apiDo(t, s, "POST", "/api/v1/feeds", spec); code != 400 || !strings.Contains(string(b), `"field":`+field) {
			t.Errorf("%s: %d %s, want 400 naming %s", spec, code, b, field)
		}
	}
	createFeed(t, s, `{"name":"xdr-out","type":"xdr","sources":["SCP"],"topic":"records","kafka":{"brokers":["127.0.0.1:1"]}}`)
}
