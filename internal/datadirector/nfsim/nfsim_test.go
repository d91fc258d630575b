package nfsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// checker validates consumed records: sizes, decoding, contiguous seq per
// NF type, transactions sharing correlation ids.
type checker struct {
	t     *testing.T
	size  int
	runID string
	mu    sync.Mutex
	count map[string]int64
	seqs  map[string]map[int64]bool
	corr  map[string]map[string][]nfcopy.Direction // nf → correlation id → directions
	c     nfcopy.Copy
}

func newChecker(t *testing.T, size int, runID string) *checker {
	return &checker{t: t, size: size, runID: runID, count: map[string]int64{}, seqs: map[string]map[int64]bool{},
		corr: map[string]map[string][]nfcopy.Direction{}}
}

func (k *checker) add(topic string, rec []byte) {
	t := k.t
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(rec) != k.size {
		t.Errorf("record is %d bytes, want %d", len(rec), k.size)
	}
	if !json.Valid(rec) {
		t.Fatalf("invalid JSON record: %s", rec)
	}
	c := &k.c
	if err := nfcopy.Decode(rec, c); err != nil {
		t.Fatalf("decode: %v\n%s", err, rec)
	}
	if topic != "" && c.NFType != topic {
		t.Errorf("copy of %s on topic %s", c.NFType, topic)
	}
	if c.Body != nil && len(c.Body) > 0 && c.Body[0] == '{' && !json.Valid(c.Body) {
		t.Errorf("body is not valid JSON: %s", c.Body)
	}
	parts := strings.Split(c.Header("x-signalbox-seq"), "/")
	if len(parts) != 3 || parts[0] != k.runID || parts[1] != c.NFType {
		t.Fatalf("bad x-signalbox-seq %q", c.Header("x-signalbox-seq"))
	}
	n, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if k.seqs[c.NFType] == nil {
		k.seqs[c.NFType] = map[int64]bool{}
		k.corr[c.NFType] = map[string][]nfcopy.Direction{}
	}
	if k.seqs[c.NFType][n] {
		t.Errorf("duplicate seq %s", c.Header("x-signalbox-seq"))
	}
	k.seqs[c.NFType][n] = true
	k.count[c.NFType]++
	k.corr[c.NFType][c.CorrelationID] = append(k.corr[c.NFType][c.CorrelationID], c.Direction)
	if c.Timestamp < time.Now().Add(-time.Minute).UnixNano() || c.Timestamp > time.Now().UnixNano() {
		t.Errorf("timestamp %d is not the send time", c.Timestamp)
	}
	if c.StreamID() == 0 {
		t.Errorf("no x-http2-stream-id")
	}
}

// verify checks counts, contiguous seqs and transactions; ordered also
// checks the copies of a transaction arrived in trigger-point order (Kafka
// keeps it per partition; parallel HTTP/2 batches need not).
func (k *checker) verify(want map[string]int64, ordered bool) {
	t := k.t
	for nf, w := range want {
		if k.count[nf] != w {
			t.Errorf("%s: got %d copies, want %d", nf, k.count[nf], w)
		}
		for i := int64(1); i <= w; i++ {
			if !k.seqs[nf][i] {
				t.Errorf("%s: seq %d missing", nf, i)
				break
			}
		}
		per := int64(2)
		wantDirs := "REQUEST_INGRESS,RESPONSE_EGRESS"
		if nf == "SCP" {
			per, wantDirs = 4, "REQUEST_INGRESS,REQUEST_EGRESS,RESPONSE_INGRESS,RESPONSE_EGRESS"
		}
		if int64(len(k.corr[nf]))*per != w {
			t.Errorf("%s: %d transactions for %d copies", nf, len(k.corr[nf]), w)
		}
		for id, dirs := range k.corr[nf] {
			var s []string
			for _, d := range dirs {
				s = append(s, d.String())
			}
			if !ordered {
				slices.SortFunc(s, func(a, b string) int { return strings.Index(wantDirs, a) - strings.Index(wantDirs, b) })
			}
			if strings.Join(s, ",") != wantDirs {
				t.Errorf("%s transaction %s: copies %v", nf, id, s)
				break
			}
		}
	}
}

func TestRunKafka(t *testing.T) {
	for _, key := range []string{"correlation", ""} {
		t.Run("key="+key, func(t *testing.T) { testRunKafka(t, key) })
	}
}

func testRunKafka(t *testing.T, key string) {
	cl := nfCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Brokers: cl.ListenAddrs(), Rate: 4000, Count: 1200, Size: 3000, RunID: "t1", Key: key}
	var out bytes.Buffer
	st, err := Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := map[string]int64{"SCP": 640, "NRF": 200, "SEPP": 360}
	for nf, w := range want {
		if st.Sent[nf] != w {
			t.Errorf("stats: %s sent %d, want %d", nf, st.Sent[nf], w)
		}
	}
	if st.Oversize != 0 || st.Errors != 0 {
		t.Errorf("oversize %d errors %d", st.Oversize, st.Errors)
	}
	// Every paced copy's acknowledgement is timed; the first copy of each
	// NF, sent alone before the clock starts, is not.
	if a := st.Ack; a.N != st.Total()-int64(len(want)) || !(a.P50 > 0 && a.P50 <= a.P99 && a.P99 <= a.Max) {
		t.Errorf("ack latency %+v over %d copies", a, st.Total())
	}
	if r := st.ProduceRTT; r.N == 0 || r.N > st.Ack.N || !(r.P50 > 0 && r.P50 <= r.Max) {
		t.Errorf("produce round trips %+v", r)
	}
	if !strings.Contains(out.String(), "ack latency ms: p50 ") || !strings.Contains(out.String(), "produce round trip ms: p50 ") {
		t.Errorf("summary does not report the ack latency: %s", out.String())
	}
	// 1200 copies at 4000/s take about 0.3 s: the pacing must hold them back.
	if st.Elapsed < 250*time.Millisecond {
		t.Errorf("run took %s: not paced", st.Elapsed)
	}
	if !strings.Contains(out.String(), "total") {
		t.Errorf("no summary printed: %s", out.String())
	}

	cons := consumeFromStart(t, cl)
	k := newChecker(t, 3000, "t1")
	got := 0
	keysPerCorr := map[string]int32{}
	for got < 1200 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 1200: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			k.add(r.Topic, r.Value)
			if key == "" {
				if r.Key != nil {
					t.Errorf("unkeyed run: record with key %q", r.Key)
				}
				return
			}
			tk := r.Topic + "/" + string(r.Key)
			if p, ok := keysPerCorr[tk]; ok && p != r.Partition {
				t.Errorf("transaction %s split over partitions %d and %d", tk, p, r.Partition)
			}
			keysPerCorr[tk] = r.Partition
		})
	}
	// Unkeyed, a transaction's copies may land in different partitions, so
	// a consumer sees them in no particular order.
	k.verify(want, key != "")
}

// ingestServer is an HTTP/2 (h2c) copy ingest, as signalbox's: it calls
// line with each NDJSON line of a POST, and is closed when t ends.
func ingestServer(t *testing.T, line func([]byte)) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		if r.Header.Get("Content-Type") != "application/x-ndjson" {
			http.Error(w, "content type", http.StatusUnsupportedMediaType)
			return
		}
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line(sc.Bytes())
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestRunHTTPIngest(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := ingestServer(t, func(line []byte) {
		mu.Lock()
		bodies = append(bodies, append([]byte(nil), line...))
		mu.Unlock()
	})

	cfg := Config{Ingest: srv.URL, Rate: 5000, Count: 300, Size: 2000, RunID: "h1",
		Mix: map[string]float64{"SCP": 1, "NRF": 1, "PCF": 1}}
	st, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"SCP": 100, "NRF": 100, "PCF": 100}
	k := newChecker(t, 2000, "h1")
	for _, b := range bodies {
		k.add("", b)
	}
	// 100 SCP copies end mid-transaction (4 per transaction): check counts
	// and seqs only for SCP, everything for the 2-copy NF types.
	k.verify(map[string]int64{"NRF": 100, "PCF": 100}, false)
	for nf, w := range want {
		if st.Sent[nf] != w || k.count[nf] != w {
			t.Errorf("%s: stats %d, received %d, want %d", nf, st.Sent[nf], k.count[nf], w)
		}
	}
}

// A count smaller than the mix leaves some NF types without a copy to send:
// the run ends once the others have sent theirs (a quota of 0 had meant no
// limit, and the run went on for ever).
func TestRunCountSmallerThanMix(t *testing.T) {
	var mu sync.Mutex
	lines := 0
	srv := ingestServer(t, func([]byte) {
		mu.Lock()
		lines++
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := Run(ctx, Config{Ingest: srv.URL, Count: 1, Size: 1000}, io.Discard) // three NF types in the default mix
	if err != nil || ctx.Err() != nil {
		t.Fatalf("run: %v (ctx: %v)", err, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if st.Total() != 1 || lines != 1 {
		t.Fatalf("sent %d, received %d; want 1", st.Total(), lines)
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no target", Config{Count: 1}, "exactly one"},
		{"both targets", Config{Brokers: []string{"x:1"}, Ingest: "http://x", Count: 1}, "exactly one"},
		{"bad rate", Config{Ingest: "http://x", Rate: -1}, "rate"},
		{"bad url", Config{Ingest: "ftp://x", Count: 1}, "http://"},
		{"bad sasl", Config{Brokers: []string{"127.0.0.1:1"}, SASLMechanism: "GSSAPI", Count: 1}, "sasl"},
		{"bad run id", Config{Ingest: "http://x", RunID: "a/b"}, "run id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.cfg, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestFlagsAndMix(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{"-brokers", "a:9092, b:9092", "-mix", "SCP=2,NRF=1", "-rate", "60000", "-size", "1500",
		"-count", "10", "-duration", "2s", "-topics", "SCP=scp-in", "-sasl-mechanism", "PLAIN", "-tls"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers) != 2 || c.Brokers[1] != "b:9092" || c.Mix["SCP"] != 2 || c.Rate != 60000 || c.Size != 1500 ||
		c.Count != 10 || c.Duration != 2*time.Second || c.Topics["SCP"] != "scp-in" || !c.TLS {
		t.Errorf("flags parsed to %+v", c)
	}
	for _, bad := range []string{"SCP", "SCP=0", "SCP=-1", "=3", "SCP=x", ""} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
	q := Quotas(map[string]float64{"A": 1, "B": 1, "C": 1}, 10)
	if q["A"]+q["B"]+q["C"] != 10 {
		t.Errorf("quotas %v do not sum to 10", q)
	}
}

func TestRecordSizes(t *testing.T) {
	for _, nf := range []string{"SCP", "NRF", "SEPP", "PCF"} {
		g := newGen(nf, "r", 7)
		var c nfcopy.Copy
		for i := 0; i < 400; i++ {
			rec, over := g.appendRecord(nil, g.nextCopy(), testTS, 3000)
			if over || len(rec) != 3000 {
				t.Fatalf("%s: record %d bytes (over=%v)", nf, len(rec), over)
			}
			if err := nfcopy.Decode(rec, &c); err != nil {
				t.Fatalf("%s: %v\n%s", nf, err, rec)
			}
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	g := newGen("SCP", "bench", 1)
	buf := make([]byte, 0, 4096)
	b.SetBytes(3000)
	b.ReportAllocs()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	for b.Loop() {
		buf, _ = g.appendRecord(buf[:0], g.nextCopy(), testTS, 3000)
	}
}

// TestGenerateReusesStorage: once warm, making a copy's record allocates
// nothing: the transaction's strings live in storage reused by the next
// transaction, once its copies are sent.
func TestGenerateReusesStorage(t *testing.T) {
	g := newGen("SCP", "alloc", 7)
	buf := make([]byte, 0, 4096)
	for range 1000 {
		buf, _ = g.appendRecord(buf[:0], g.nextCopy(), testTS, 3000)
	}
	limit := 0.01
	if raceEnabled {
		limit = 3 // the race detector allocates too; 14 per record before this storage would still show
	}
	if n := testing.AllocsPerRun(2000, func() { buf, _ = g.appendRecord(buf[:0], g.nextCopy(), testTS, 3000) }); n > limit {
		t.Errorf("%.2f allocations per record, want 0", n)
	}
	var c nfcopy.Copy
	want := fmt.Sprintf("alloc/SCP/%d", g.seq)
	if err := nfcopy.Decode(buf, &c); err != nil || c.Header("x-signalbox-seq") != want || c.Header("x-http2-stream-id") == "" {
		t.Fatalf("last record: %v, seq %q (want %q)", err, c.Header("x-signalbox-seq"), want)
	}
}

func TestCompressionCodec(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"", true}, {"snappy", true}, {"LZ4", true}, {"zstd", true}, {"gzip", true}, {"none", true}, {"brotli", false}} {
		_, err := compressionCodec(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("compressionCodec(%q) error %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	if _, err := Run(context.Background(), Config{Brokers: []string{"127.0.0.1:1"}, Compression: "brotli", Count: 1}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "brotli") {
		t.Errorf("Run with a bad compression: %v", err)
	}
}

// TestLegsMirror: on each leg of a transaction, the response flows back on
// the request's 4-tuple and HTTP/2 stream, so a synthetic feed shows one
// exchange per leg.
func TestLegsMirror(t *testing.T) {
	for _, nf := range []string{"SCP", "NRF", "SEPP"} {
		g := newGen(nf, "run", 7)
		for tx := 0; tx < 50; tx++ {
			legs := map[bool][]nfcopy.Copy{} // producer-facing? -> copies
			n := 2
			if nf == "SCP" {
				n = 4
			}
			for i := 0; i < n; i++ {
				c := g.nextCopy()
				out := c.Direction == nfcopy.RequestEgress || c.Direction == nfcopy.ResponseIngress
				legs[out] = append(legs[out], *c.Clone())
			}
			for out, cs := range legs {
				if len(cs) != 2 {
					t.Fatalf("%s leg out=%v has %d copies", nf, out, len(cs))
				}
				req, resp := cs[0], cs[1]
				if !req.Direction.IsRequest() || resp.Direction.IsRequest() {
					t.Fatalf("%s: order %v %v", nf, req.Direction, resp.Direction)
				}
				if req.SourceIP != resp.DestIP || req.DestIP != resp.SourceIP || req.SourcePort != resp.DestPort || req.DestPort != resp.SourcePort {
					t.Fatalf("%s: response does not mirror request: %s:%d>%s:%d vs %s:%d>%s:%d", nf,
						req.SourceIP, req.SourcePort, req.DestIP, req.DestPort, resp.SourceIP, resp.SourcePort, resp.DestIP, resp.DestPort)
				}
				if req.StreamID() != resp.StreamID() || req.StreamID()%2 != 1 {
					t.Fatalf("%s: streams %d %d", nf, req.StreamID(), resp.StreamID())
				}
			}
		}
	}
}

// TestRunPrewarm checks that -prewarm copies go out under their own run id,
// are acknowledged before the run, and are counted apart from it.
func TestRunPrewarm(t *testing.T) {
	cl := nfCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Brokers: cl.ListenAddrs(), Rate: 4000, Count: 400, Size: 3000, RunID: "r1",
		Prewarm: 100 * time.Millisecond, PrewarmRunID: "w1"}
	var out bytes.Buffer
	st, err := Run(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	// The prewarm is every copy due in its 100 ms at 4,000/s, however late
	// the process ran: 399 (each NF's share rounded down).
	if st.Total() != 400 || st.Prewarm < 390 || st.Prewarm > 400 {
		t.Fatalf("sent %d, prewarm %d; want 400 and 390-400", st.Total(), st.Prewarm)
	}
	if st.Ack.N != st.Total()-3 { // neither the prewarm nor the three first copies
		t.Errorf("ack latency over %d copies, want %d", st.Ack.N, st.Total()-3)
	}
	if !strings.Contains(out.String(), "prewarm "+strconv.FormatInt(st.Prewarm, 10)+" copies under run id w1") {
		t.Errorf("summary does not report the prewarm: %s", out.String())
	}
	cons := consumeFromStart(t, cl)
	runs := map[string]int64{}
	var n int64
	for n < 400+st.Prewarm {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var c nfcopy.Copy
			if err := nfcopy.Decode(r.Value, &c); err != nil {
				t.Fatal(err)
			}
			id, _, _ := strings.Cut(c.Header("x-signalbox-seq"), "/")
			runs[id]++
			n++
		})
	}
	if runs["r1"] != 400 || runs["w1"] != st.Prewarm || len(runs) != 2 {
		t.Fatalf("copies by run id %v, want r1 400, w1 %d", runs, st.Prewarm)
	}
	bad := Config{Brokers: []string{"x"}, Rate: 1, Prewarm: time.Second, PrewarmRunID: "same", RunID: "same"}
	if _, err := Run(ctx, bad, io.Discard); err == nil {
		t.Error("prewarm under the run's own id accepted")
	}
}

// nfCluster is a one-broker kfake cluster with the three NF topics, closed
// when the test ends.
func nfCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "SCP", "NRF", "SEPP"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeFromStart returns a client reading the NF topics of cl from their
// first offsets, closed when the test ends.
func consumeFromStart(t *testing.T, cl *kfake.Cluster) *kgo.Client {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumeTopics("SCP", "NRF", "SEPP"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// Transactions ride a few long-lived HTTP/2 connections per peer, as SBI
// clients keep them: connections are reused, each connection's stream ids
// grow, and the peers' instance ids repeat with their addresses.
func TestConnectionsPersist(t *testing.T) {
	g := newGen("SCP", "run", 3)
	type conn struct {
		client, server string
		port           uint16
	}
	lastStream := map[conn]uint32{}
	uses := map[conn]int{}
	ipOf := map[string]string{} // consumer instance id -> its IP
	for range 4000 {
		c := g.nextCopy()
		if !c.Direction.IsRequest() {
			continue
		}
		k := conn{c.SourceIP, c.DestIP, c.SourcePort}
		uses[k]++
		if s := c.StreamID(); s <= lastStream[k] {
			t.Fatalf("connection %v: stream %d after %d", k, s, lastStream[k])
		} else {
			lastStream[k] = s
		}
		if c.Direction == nfcopy.RequestIngress {
			if ip, ok := ipOf[c.ConsumerID]; ok && ip != c.SourceIP {
				t.Fatalf("consumer %s at %s and %s", c.ConsumerID, ip, c.SourceIP)
			}
			ipOf[c.ConsumerID] = c.SourceIP
		}
	}
	if max := 2 * peerInstances * peerConns; len(uses) > max {
		t.Errorf("%d connections for 2,000 requests, want at most %d", len(uses), max)
	}
	if len(uses) < peerInstances {
		t.Errorf("only %d connections: peers not spread", len(uses))
	}
}

// TestProducerPerNF: each NF type produces through a Kafka client of its
// own (a producer id per topic), as separate NFs do; -shared-producer puts
// them all on one.
func TestProducerPerNF(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			cl := nfCluster(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cfg := Config{Brokers: cl.ListenAddrs(), Rate: 3000, Count: 300, RunID: "pp", SharedProducer: shared}
			var out bytes.Buffer
			if _, err := Run(ctx, cfg, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			cons := consumeFromStart(t, cl)
			ids := map[string]map[int64]bool{}
			all := map[int64]bool{}
			for got := 0; got < 300; {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of 300: %v", got, err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					got++
					if ids[r.Topic] == nil {
						ids[r.Topic] = map[int64]bool{}
					}
					ids[r.Topic][r.ProducerID] = true
					all[r.ProducerID] = true
				})
			}
			for topic, ps := range ids {
				if len(ps) != 1 {
					t.Errorf("%s: %d producer ids, want 1", topic, len(ps))
				}
			}
			want := len(ids)
			if shared {
				want = 1
			}
			if len(ids) != 3 || len(all) != want {
				t.Errorf("%d topics, %d producer ids in all; want 3 topics, %d ids", len(ids), len(all), want)
			}
		})
	}
}

// testTS is a copy time the decoder reads as nanoseconds since the epoch.
const testTS = 1678705695995010066
