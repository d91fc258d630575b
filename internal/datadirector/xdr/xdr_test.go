package xdr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/testkit"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTest(t testing.TB, cfg Config) (*Correlator, *clock, *prometheus.Registry) {
	t.Helper()
	ck := &clock{t: time.Unix(1_700_000_000, 0)}
	reg := prometheus.NewRegistry()
	cfg.Now, cfg.Registerer = ck.Now, reg
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x, ck, reg
}

const (
	supi = "imsi-234300000014975"
	path = "/nudm-ueau/v1/" + supi + "/security-information/generate-auth-data"
)

// mk builds a copy of correlation id corr made by NF id (type nf) at dir.
func mk(corr, nf, id string, dir nfcopy.Direction, ts int64, status int) *nfcopy.Copy {
	c := &nfcopy.Copy{CorrelationID: corr, NFType: nf, NFInstanceID: id, NFFQDN: strings.ToLower(nf) + "1.example",
		Direction: dir, Timestamp: ts, ProducerID: "nrf-1", ProducerFQDN: "udm1.example"}
	if dir.IsRequest() {
		c.Headers = []nfcopy.Header{{Name: ":method", Values: []string{"POST"}}, {Name: ":path", Values: []string{path}}}
		c.Body = []byte(`{"servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org","sNssai":{"sst":1,"sd":"000001"},"dnn":"internet"}`)
	} else {
		c.Headers = []nfcopy.Header{{Name: ":status", Values: []string{fmt.Sprint(status)}}}
		c.Body = []byte(`{"gpsis":["msisdn-447700900123"],"pei":"imeisv-3512345678901234"}`)
	}
	return c
}

// scp4 is an SCP's four copies of one transaction, 1ms apart, in flow order.
func scp4(corr string, status int) []*nfcopy.Copy {
	return []*nfcopy.Copy{
		mk(corr, "SCP", "scp-1", nfcopy.RequestIngress, 1000, 0),
		mk(corr, "SCP", "scp-1", nfcopy.RequestEgress, 2000, 0),
		mk(corr, "SCP", "scp-1", nfcopy.ResponseIngress, 8000, status),
		mk(corr, "SCP", "scp-1", nfcopy.ResponseEgress, 9500, status),
	}
}

func TestCompleteSCP(t *testing.T) {
	x, _, reg := newTest(t, Config{})
	var out []Record
	for i, c := range scp4("c1", 200) {
		out = x.Add(c, out)
		if i < 3 && len(out) != 0 {
			t.Fatalf("record after %d copies", i+1)
		}
	}
	if len(out) != 1 {
		t.Fatalf("got %d records, want 1", len(out))
	}
	r := out[0]
	want := Record{CorrelationID: "c1", Service: "nudm-ueau", APIVersion: "v1", Method: "POST", Path: path, Status: 200,
		SUPI: supi, GPSI: "msisdn-447700900123", PEI: "imeisv-3512345678901234", DNN: "internet", SNSSAI: "1-000001",
		RequestSize: len(mk("", "", "", nfcopy.RequestIngress, 0, 0).Body), ResponseSize: len(mk("", "", "", nfcopy.ResponseEgress, 0, 200).Body),
		Start: 1000, End: 9500, LatencyNs: 8500, Result: ResultComplete, Copies: 4, Producer: "nrf-1"}
	got := r
	got.Hops, got.HopLatencies = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("record\n got %+v\nwant %+v", got, want)
	}
	if len(r.Hops) != 4 || r.Hops[0].Direction != "REQUEST_INGRESS" || r.Hops[3].Direction != "RESPONSE_EGRESS" || r.Hops[3].Status != 200 {
		t.Errorf("hops %+v", r.Hops)
	}
	if len(r.HopLatencies) != 1 {
		t.Fatalf("hop latencies %+v", r.HopLatencies)
	}
	if hl := r.HopLatencies[0]; hl.TotalNs != 8500 || hl.DownstreamNs != 6000 || hl.ProcessingNs != 2500 || hl.NFType != "SCP" {
		t.Errorf("hop latency %+v", hl)
	}
	if x.Pending() != 0 {
		t.Errorf("pending %d", x.Pending())
	}
	if n := testutil.ToFloat64(x.m.transactions.WithLabelValues("SCP", "nudm-ueau", "2xx")); n != 1 {
		t.Errorf("transactions_total = %v", n)
	}
	if n := testutil.CollectAndCount(reg, "signalbox_xdr_latency_seconds"); n != 1 {
		t.Errorf("latency series %d", n)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"hop_latencies":[{"nf_type":"SCP"`) || !strings.Contains(string(b), `"latency_ns":8500`) {
		t.Errorf("json %s %v", b, err)
	}
}

// permutations calls f with every ordering of n items.
func permutations(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			f(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}

func TestOutOfOrder(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	n := 0
	permutations(4, func(p []int) {
		n++
		corr := fmt.Sprint("p", n)
		cs := scp4(corr, 404)
		var out []Record
		for i, j := range p {
			out = x.Add(cs[j], out)
			if i < 3 && len(out) != 0 {
				t.Fatalf("order %v: record after %d copies", p, i+1)
			}
		}
		if len(out) != 1 || out[0].Result != ResultComplete || out[0].Status != 404 || out[0].LatencyNs != 8500 ||
			out[0].Hops[0].Timestamp != 1000 || out[0].HopLatencies[0].DownstreamNs != 6000 || out[0].Method != "POST" {
			t.Fatalf("order %v: %+v", p, out)
		}
	})
	if n != 24 || x.Pending() != 0 {
		t.Fatalf("%d orders, %d pending", n, x.Pending())
	}
}

func TestDuplicates(t *testing.T) {
	x, ck, _ := newTest(t, Config{})
	cs := scp4("d1", 201)
	var out []Record
	for _, i := range []int{0, 0, 1, 2, 2, 2, 3} {
		out = x.Add(cs[i], out)
	}
	if len(out) != 1 || out[0].Copies != 4 || out[0].Duplicates != 3 || out[0].Result != ResultComplete {
		t.Fatalf("%+v", out)
	}
	// A duplicate after the record went out is late, not a new transaction.
	out = x.Add(cs[3], out[:0])
	out = x.Add(cs[0], out)
	ck.add(6 * time.Second)
	out = x.Expire(ck.Now(), out)
	if len(out) != 0 || x.Pending() != 0 {
		t.Fatalf("late copies made records: %+v", out)
	}
	if d, l := testutil.ToFloat64(x.m.duplicates), testutil.ToFloat64(x.m.late); d != 3 || l != 2 {
		t.Errorf("duplicates %v late %v", d, l)
	}
	// Once the tombstone has gone, the id may start a new transaction.
	out = x.Add(cs[0], out)
	if x.Pending() != 1 || len(out) != 0 {
		t.Fatalf("pending %d", x.Pending())
	}
}

func TestTimeoutsAndResults(t *testing.T) {
	tests := []struct {
		name   string
		copies []*nfcopy.Copy
		result string
		status int
		class  string
	}{
		{"missing response", scp4("t", 200)[:2], ResultResponseTimeout, 0, "timeout"},
		{"orphan response", scp4("t", 503)[2:], ResultOrphanResponse, 503, "5xx"},
		{"partial: response egress lost", scp4("t", 200)[:3], ResultPartial, 200, "2xx"},
		// An SCP answering itself copies only two of its four points.
		{"scp local answer", []*nfcopy.Copy{scp4("t", 429)[0], scp4("t", 429)[3]}, ResultComplete, 429, "4xx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, ck, _ := newTest(t, Config{Timeout: time.Second})
			var out []Record
			for _, c := range tc.copies {
				out = x.Add(c, out)
			}
			out = x.Expire(ck.Now().Add(999*time.Millisecond), out)
			if len(out) != 0 {
				t.Fatalf("emitted before the timeout: %+v", out)
			}
			ck.add(time.Second)
			out = x.Expire(ck.Now(), out)
			if len(out) != 1 {
				t.Fatalf("got %d records", len(out))
			}
			r := out[0]
			if r.Result != tc.result || r.Status != tc.status || r.StatusClass() != tc.class || r.Copies != len(tc.copies) {
				t.Errorf("got %s status %d class %s copies %d", r.Result, r.Status, r.StatusClass(), r.Copies)
			}
			if x.Pending() != 0 {
				t.Errorf("pending %d", x.Pending())
			}
		})
	}
}

func TestCrossNF(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	// The NRF (instance nrf-1, the producer in mk's copies) is known to copy
	// once it has copied anything.
	x.Add(mk("warm", "NRF", "nrf-1", nfcopy.RequestIngress, 1, 0), nil)

	nrf := func(corr string) []*nfcopy.Copy {
		return []*nfcopy.Copy{
			mk(corr, "NRF", "nrf-1", nfcopy.RequestIngress, 3000, 0),
			mk(corr, "NRF", "nrf-1", nfcopy.ResponseEgress, 7000, 200),
		}
	}
	orders := map[string]func(s, n []*nfcopy.Copy) []*nfcopy.Copy{
		"flow order": func(s, n []*nfcopy.Copy) []*nfcopy.Copy { return []*nfcopy.Copy{s[0], s[1], n[0], n[1], s[2], s[3]} },
		"scp first":  func(s, n []*nfcopy.Copy) []*nfcopy.Copy { return append(s, n...) },
		"nrf late":   func(s, n []*nfcopy.Copy) []*nfcopy.Copy { return []*nfcopy.Copy{s[3], s[2], n[1], s[1], s[0], n[0]} },
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			corr := "x-" + name
			all := order(scp4(corr, 200), nrf(corr))
			var out []Record
			for i, c := range all {
				out = x.Add(c, out)
				if i < len(all)-1 && len(out) != 0 {
					t.Fatalf("record after %d copies: %+v", i+1, out[0].Hops)
				}
			}
			if len(out) != 1 {
				t.Fatalf("%d records", len(out))
			}
			r := out[0]
			if r.Copies != 6 || r.Result != ResultComplete || len(r.HopLatencies) != 2 {
				t.Fatalf("%+v", r)
			}
			scp, n := r.HopLatencies[0], r.HopLatencies[1]
			if scp.NFType != "SCP" || scp.TotalNs != 8500 || scp.DownstreamNs != 6000 || n.NFType != "NRF" || n.TotalNs != 4000 || n.DownstreamNs != -1 {
				t.Errorf("hop latencies %+v", r.HopLatencies)
			}
			if types := r.NFTypes(); fmt.Sprint(types) != "[SCP NRF]" {
				t.Errorf("nf types %v", types)
			}
		})
	}
}

func TestEviction(t *testing.T) {
	x, _, reg := newTest(t, Config{MaxPending: 4, Shards: 1})
	var out []Record
	for i := range 4 {
		out = x.Add(mk(fmt.Sprint("e", i), "NRF", "n", nfcopy.RequestIngress, int64(i), 0), out)
	}
	if len(out) != 0 || x.Pending() != 4 {
		t.Fatalf("pending %d, out %d", x.Pending(), len(out))
	}
	out = x.Add(mk("e4", "NRF", "n", nfcopy.RequestIngress, 4, 0), out)
	if len(out) != 1 || out[0].CorrelationID != "e0" || !out[0].Evicted || out[0].Result != ResultResponseTimeout {
		t.Fatalf("%+v", out)
	}
	if x.Pending() != 4 {
		t.Errorf("pending %d", x.Pending())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP signalbox_xdr_evictions_total Transactions emitted before their timeout because the correlator held MaxPending.
# TYPE signalbox_xdr_evictions_total counter
signalbox_xdr_evictions_total 1
`), "signalbox_xdr_evictions_total"); err != nil {
		t.Error(err)
	}
	out = x.Flush(out[:0])
	if len(out) != 4 || x.Pending() != 0 {
		t.Errorf("flush: %d records, %d pending", len(out), x.Pending())
	}
}

func TestDropped(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	out := x.Add(&nfcopy.Copy{NFType: "SCP", Direction: nfcopy.RequestIngress}, nil)
	out = x.Add(&nfcopy.Copy{NFType: "SCP", CorrelationID: "z"}, out)
	if len(out) != 0 || x.Pending() != 0 || testutil.ToFloat64(x.m.dropped) != 1 || testutil.ToFloat64(x.m.droppedDir) != 1 {
		t.Fatalf("dropped copies not counted")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Timeout: -1}, {MaxPending: -1}, {Shards: 5000}, {ExpectedCopies: map[string]int{"SCP": 5}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Registerer: reg}); err == nil || !strings.Contains(err.Error(), "register") {
		t.Errorf("second correlator on one registry: %v", err)
	}
}

// TestCopiesNotRetained decodes copies from one buffer that is overwritten
// after every Add: the record must not change.
func TestCopiesNotRetained(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	var buf []byte
	var c nfcopy.Copy
	var out []Record
	for _, src := range scp4("r1", 200) {
		src.Timestamp += 1678705695_000_000_000 // a time the decoder reads as nanoseconds
		buf = nfcopy.AppendJSON(buf[:0], src)
		if err := nfcopy.Decode(buf, &c); err != nil {
			t.Fatal(err)
		}
		out = x.Add(&c, out)
		for i := range buf {
			buf[i] = '#'
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d records", len(out))
	}
	r := out[0]
	if r.CorrelationID != "r1" || r.Path != path || r.SUPI != supi || r.Hops[0].NFFQDN != "scp1.example" || r.Method != "POST" || r.SNSSAI != "1-000001" {
		t.Errorf("record changed with the buffer: %+v", r)
	}
}

func TestConcurrent(t *testing.T) {
	x, _, _ := newTest(t, Config{Shards: 8})
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out []Record
			for i := range 500 {
				corr := fmt.Sprint(g, "-", i)
				cs := scp4(corr, 200)
				// Two goroutines share each transaction's copies in real
				// feeds (partitions); here each goroutine interleaves its own.
				for _, j := range []int{2, 0, 3, 1} {
					out = x.Add(cs[j], out)
				}
			}
			mu.Lock()
			total += len(out)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 2000 || x.Pending() != 0 {
		t.Fatalf("records %d pending %d", total, x.Pending())
	}
}

// collectNfsim runs nfsim into an h2c endpoint and returns the records.
func collectNfsim(t testing.TB, cfg nfsim.Config) [][]byte {
	t.Helper()
	var mu sync.Mutex
	var recs [][]byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the whole body before taking the lock: a handler waiting
		// for the lock with its body unread holds HTTP/2 connection window
		// the lock holder needs.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for line := range bytes.SplitSeq(body, []byte{'\n'}) {
			if len(line) > 0 {
				recs = append(recs, line)
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	cfg.Ingest = srv.URL
	if _, err := nfsim.Run(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestNfsimTraffic correlates simulator traffic, shuffled within windows of
// 64 copies (partitions and topics interleave), with every copy sent twice
// (at-least-once redelivery).
func TestNfsimTraffic(t *testing.T) {
	recs := collectNfsim(t, nfsim.Config{Count: 4000, Size: 3000, RunID: "x1",
		Mix: map[string]float64{"SCP": 2, "NRF": 1, "PCF": 1}})
	if len(recs) != 4000 {
		t.Fatalf("received %d copies", len(recs))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(recs); i += 64 {
		w := recs[i:min(i+64, len(recs))]
		rng.Shuffle(len(w), func(a, b int) { w[a], w[b] = w[b], w[a] })
	}
	x, ck, _ := newTest(t, Config{})
	var c nfcopy.Copy
	var out []Record
	for i, b := range recs {
		if err := nfcopy.Decode(b, &c); err != nil {
			t.Fatal(err)
		}
		out = x.Add(&c, out)
		if i%3 == 0 { // a redelivered copy
			out = x.Add(&c, out)
		}
	}
	ck.add(10 * time.Second)
	out = x.Expire(ck.Now(), out)
	byNF := map[string]int{}
	for _, r := range out {
		if r.Result != ResultComplete || r.Status == 0 || r.Service == "" || r.LatencyNs < 0 {
			t.Fatalf("record %+v", r)
		}
		byNF[r.HopLatencies[0].NFType]++
		if r.HopLatencies[0].NFType == "SCP" && (r.Copies != 4 || r.HopLatencies[0].DownstreamNs < 0) {
			t.Fatalf("scp record %+v", r)
		}
	}
	if fmt.Sprint(byNF) != "map[NRF:500 PCF:500 SCP:500]" {
		t.Errorf("records per NF %v, want 500 each", byNF)
	}
}

func BenchmarkAdd(b *testing.B) {
	recs := collectNfsim(b, nfsim.Config{Count: 4000, Size: 3000, RunID: "b1"})
	copies := make([]nfcopy.Copy, len(recs))
	for i := range recs {
		if err := nfcopy.Decode(recs[i], &copies[i]); err != nil {
			b.Fatal(err)
		}
	}
	// Steady state: the clock moves 1µs per copy and Expire runs every 1000
	// copies, so tombstones and timeouts turn over as in a running feed. The
	// 4000 copies are replayed: between rounds the clock jumps past the
	// timeout so their correlation ids are free again.
	x, ck, _ := newTest(b, Config{Timeout: 50 * time.Millisecond})
	var out []Record
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testkit.CPUTime()
	for i := 0; i < b.N; i++ {
		k := i % len(copies)
		if k == 0 && i > 0 {
			ck.add(100 * time.Millisecond)
			out = x.Expire(ck.Now(), out[:0])
		}
		out = x.Add(&copies[k], out[:0])
		if i%1000 == 999 {
			ck.add(time.Millisecond)
			out = x.Expire(ck.Now(), out[:0])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "copies/s")
	testkit.ReportCPU(b, cpu0)
}

func TestInvalidDirection(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	c := mk("bad", "SCP", "s", nfcopy.RequestIngress, 1, 0)
	c.Direction = 9
	if out := x.Add(c, nil); len(out) != 0 || x.Pending() != 0 || testutil.ToFloat64(x.m.droppedDir) != 1 {
		t.Fatalf("invalid direction not dropped")
	}
}

// TestLinger: the NRF's copies come first (its topic is ahead) and complete
// the transaction on their own; Linger keeps it open for the SCP's.
func TestLinger(t *testing.T) {
	nrf := func(corr string) []*nfcopy.Copy {
		return []*nfcopy.Copy{
			mk(corr, "NRF", "nrf-1", nfcopy.RequestIngress, 3000, 0),
			mk(corr, "NRF", "nrf-1", nfcopy.ResponseEgress, 7000, 200),
		}
	}
	for _, linger := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprint("linger ", linger), func(t *testing.T) {
			x, ck, _ := newTest(t, Config{Timeout: time.Second, Linger: linger})
			var out []Record
			for _, c := range nrf("l1") {
				out = x.Add(c, out)
			}
			ck.add(100 * time.Millisecond)
			for _, c := range scp4("l1", 200) {
				out = x.Add(c, out)
			}
			if linger > 0 && len(out) != 0 {
				t.Fatalf("emitted while lingering: %+v", out)
			}
			ck.add(150 * time.Millisecond)
			out = x.Expire(ck.Now(), out)
			if len(out) != 1 {
				t.Fatalf("%d records", len(out))
			}
			r := out[0]
			want := 6
			if linger == 0 {
				want = 2 // the SCP's copies came after the record: late
				if l := testutil.ToFloat64(x.m.late); l != 4 {
					t.Errorf("late %v", l)
				}
			}
			if r.Copies != want || r.Result != ResultComplete || x.Pending() != 0 {
				t.Errorf("copies %d result %s pending %d", r.Copies, r.Result, x.Pending())
			}
			if linger > 0 && (r.HopLatencies[0].NFType != "SCP" || r.LatencyNs != 8500) {
				t.Errorf("%+v", r.HopLatencies)
			}
		})
	}
	if _, err := New(Config{Timeout: time.Second, Linger: 2 * time.Second}); err == nil {
		t.Error("linger beyond timeout accepted")
	}
}

// An SCP that retries another producer keeps the correlation id and takes a
// new hop-by-hop id: the retry is a hop of its own, not a duplicate, and the
// record's result is the final answer's.
func TestRetryIsAHop(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	hop := func(c *nfcopy.Copy, id string) *nfcopy.Copy { c.HopByHopID = id; return c }
	copies := []*nfcopy.Copy{
		hop(mk("rt", "SCP", "scp-1", nfcopy.RequestIngress, 1000, 0), "h0"),
		hop(mk("rt", "SCP", "scp-1", nfcopy.RequestEgress, 2000, 0), "h1"),
		hop(mk("rt", "SCP", "scp-1", nfcopy.ResponseIngress, 3000, 503), "h1"),
		hop(mk("rt", "SCP", "scp-1", nfcopy.RequestEgress, 4000, 0), "h2"), // the retry
		hop(mk("rt", "SCP", "scp-1", nfcopy.RequestEgress, 4000, 0), "h2"), // a real duplicate
		hop(mk("rt", "SCP", "scp-1", nfcopy.ResponseIngress, 7000, 200), "h2"),
		hop(mk("rt", "SCP", "scp-1", nfcopy.ResponseEgress, 8000, 200), "h0"),
	}
	var out []Record
	for _, c := range copies {
		out = x.Add(c, out)
	}
	out = x.Expire(time.Now().Add(time.Hour), out)
	if len(out) != 1 {
		t.Fatalf("%d records", len(out))
	}
	r := out[0]
	if r.Copies != 6 || r.Retries != 2 || r.Duplicates != 1 || r.Status != 200 {
		t.Errorf("copies %d retries %d duplicates %d status %d; want 6, 2, 1, 200", r.Copies, r.Retries, r.Duplicates, r.Status)
	}
	hops := ""
	for _, h := range r.Hops {
		hops += h.Direction + "/" + h.HopByHopID + " "
	}
	if want := "REQUEST_INGRESS/h0 REQUEST_EGRESS/h1 RESPONSE_INGRESS/h1 REQUEST_EGRESS/h2 RESPONSE_INGRESS/h2 RESPONSE_EGRESS/h0 "; hops != want {
		t.Errorf("hops %s\nwant %s", hops, want)
	}
}

// A transaction with a copy from a dropped source goes without a record;
// the others stay. When the source comes back its copies open the
// transaction anew (no tombstone), and it completes there.
func TestDropHandsOverTransactions(t *testing.T) {
	x, ck, _ := newTest(t, Config{Timeout: time.Second})
	var out []Record
	a, b := scp4("a", 200), scp4("b", 200)
	out = x.AddFrom(a[0], 1, 10, out)
	out = x.AddFrom(a[1], 2, 20, out) // a spans sources 1 and 2
	out = x.AddFrom(b[0], 2, 15, out)
	out = x.AddFrom(b[1], 2, 16, out)
	out = x.Add(scp4("c", 200)[0], out) // no source told
	low := map[uint32]int64{}
	x.LowWater(func(src uint32, off int64) {
		if o, ok := low[src]; !ok || off < o {
			low[src] = off
		}
	})
	if want := map[uint32]int64{1: 10, 2: 15}; fmt.Sprint(low) != fmt.Sprint(want) {
		t.Fatalf("low water %v, want %v", low, want)
	}
	if n := x.Drop(func(s uint32) bool { return s == 1 }); n != 1 || x.Pending() != 2 {
		t.Fatalf("dropped %d, pending %d; want 1 dropped (a), 2 pending", n, x.Pending())
	}
	if got := testutil.ToFloat64(x.m.handedOver); got != 1 {
		t.Errorf("handed over %v, want 1", got)
	}
	// a's copies read again (by the new owner, or here after the
	// partition came back) complete it.
	for i, c := range a {
		out = x.AddFrom(c, 1, int64(30+i), out)
	}
	if len(out) != 1 || out[0].CorrelationID != "a" || out[0].Result != ResultComplete || out[0].Copies != 4 {
		t.Fatalf("after reading a again: %+v", out)
	}
	ck.add(2 * time.Second)
	out = x.Expire(ck.Now(), out[:0])
	if len(out) != 2 {
		t.Fatalf("expired %d records, want b and c", len(out))
	}
}

// Emitted reports where each transaction emitted within the timeout was
// read, lowest and highest offset per source.
func TestEmittedSpans(t *testing.T) {
	x, ck, _ := newTest(t, Config{Timeout: time.Second})
	var out []Record
	for i, c := range scp4("a", 200) {
		out = x.AddFrom(c, 7, int64(100+10*i), out) // 100, 110, 120, 130
	}
	if len(out) != 1 {
		t.Fatalf("a not complete: %d records", len(out))
	}
	var got [][3]int64
	x.Emitted(func(src uint32, lo, hi int64) { got = append(got, [3]int64{int64(src), lo, hi}) })
	if want := [][3]int64{{7, 100, 130}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted spans %v, want %v", got, want)
	}
	ck.add(2 * time.Second)
	x.Expire(ck.Now(), nil) // the tombstone ages out
	got = nil
	x.Emitted(func(src uint32, lo, hi int64) { got = append(got, [3]int64{int64(src), lo, hi}) })
	if len(got) != 0 {
		t.Fatalf("spans after the tombstone aged: %v", got)
	}
}

// A failed transaction through a SEPP keeps the ProblemDetails cause of its
// final response, its producer, and the roaming partner's PLMN.
func TestFailureCauseProducerPLMN(t *testing.T) {
	x, _, reg := newTest(t, Config{})
	var out []Record
	for _, c := range []*nfcopy.Copy{
		mk("f1", "SEPP", "sepp-1", nfcopy.RequestIngress, 1000, 0),
		mk("f1", "SEPP", "sepp-1", nfcopy.ResponseEgress, 5000, 404),
	} {
		c.ProducerID = ""
		c.ProducerFQDN = "udm1.5gc.mnc030.mcc234.3gppnetwork.org"
		if !c.Direction.IsRequest() {
			c.Body = []byte(`{"title":"Not Found","status":404,"cause":"USER_NOT_FOUND"}`)
		}
		out = x.Add(c, out)
	}
	if len(out) != 1 {
		t.Fatalf("%d records", len(out))
	}
	r := out[0]
	if r.Status != 404 || r.Cause != "USER_NOT_FOUND" || r.Producer != "udm1.5gc.mnc030.mcc234.3gppnetwork.org" || r.PLMN != "234-30" {
		t.Errorf("record: status %d cause %q producer %q plmn %q", r.Status, r.Cause, r.Producer, r.PLMN)
	}
	if got := testutil.ToFloat64(x.m.failures.WithLabelValues("SEPP", "nudm-ueau", "USER_NOT_FOUND")); got != 1 {
		t.Errorf("failures{cause=USER_NOT_FOUND} = %v", got)
	}
	if got := testutil.ToFloat64(x.m.roaming.WithLabelValues("234-30", "nudm-ueau", "failure")); got != 1 {
		t.Errorf("roaming{plmn=234-30,outcome=failure} = %v", got)
	}
	if got := testutil.ToFloat64(x.m.producers.WithLabelValues("nudm-ueau", "udm1.5gc.mnc030.mcc234.3gppnetwork.org", "failure")); got != 1 {
		t.Errorf("producer failures = %v", got)
	}
	_ = reg
}

// Causes past the bound fold into other, counted.
func TestKPILabelsBounded(t *testing.T) {
	x, _, _ := newTest(t, Config{})
	for i := range maxCauses + 10 {
		x.m.observe(&Record{Service: "nudm-sdm", Status: 500, Cause: fmt.Sprintf("CAUSE_%d", i), Result: ResultComplete})
	}
	if got := testutil.ToFloat64(x.m.failures.WithLabelValues("other", "nudm-sdm", "other")); got != 10 {
		t.Errorf("folded causes = %v, want 10", got)
	}
	if got := testutil.CollectAndCount(x.m.failures); got != maxCauses+1 {
		t.Errorf("%d failure series, want %d", got, maxCauses+1)
	}
}

func TestMaskMSISDNs(t *testing.T) {
	for in, want := range map[string]string{
		"/nudm-sdm/v2/msisdn-447700900123/sm-data":         "/nudm-sdm/v2/msisdn-xxxxxxxx0123/sm-data",
		"/nudm-uecm/v1/imsi-234300000000001/registrations": "/nudm-uecm/v1/imsi-234300000000001/registrations",
		"/x/msisdn-12/y/msisdn-4477009001":                 "/x/msisdn-12/y/msisdn-xxxxxx9001",
		"":                                                 "",
	} {
		if got := maskMSISDNs(in, 4); got != want {
			t.Errorf("maskMSISDNs(%q) = %q, want %q", in, got, want)
		}
	}
}
