package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/trace"
	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit"
)

// A subscriber trace started by a tracer captures exactly that
// subscriber's copies, from some minutes back and live, as pcap that
// unmodified tshark reads and as JSON lines; a viewer can neither see nor
// start one; the audit log shows who traced whom and who downloaded it.
func TestSubscriberTrace(t *testing.T) {
	t.Parallel()
	tshark := testkit.Tool(t, "tshark")
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir(), true)
	cfg.TraceMax = 5
	s := startServer(t, cfg)
	defer s.Shutdown()

	token := func(name, role string) string {
		code, b := apiDo(t, s, "POST", "/api/v1/tokens", `{"name":"`+name+`","role":"`+role+`"}`)
		var tk struct{ Token string }
		if err := json.Unmarshal(b, &tk); code != 201 || err != nil {
			t.Fatalf("token: %d %s", code, b)
		}
		return tk.Token
	}
	tracer, viewer := token("ops-lawful", "tracer"), token("noc-screen", "viewer")
	as := func(tok, method, path, body string) (int, []byte) { return apiAs(t, s, tok, method, path, body) }

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const target, other = "imsi-234300000000001", "imsi-234300000000999"
	n := 0
	produce := func(supi string, reversed ...bool) {
		n++
		produceTransaction(t, cl, supi, fmt.Sprintf("tx-%d", n), len(reversed) > 0 && reversed[0])
	}
	// Before the trace: two transactions of the subscriber, one of another.
	produce(target)
	produce(other)
	produce(target)

	// Only admins and tracers.
	if code, b := as(viewer, "GET", "/api/v1/traces", ""); code != 403 {
		t.Errorf("viewer lists traces: %d %s", code, b)
	}
	if code, b := as(viewer, "POST", "/api/v1/traces", `{"supi":"234300000000001","minutes":1}`); code != 403 {
		t.Errorf("viewer starts a trace: %d %s", code, b)
	}
	if code, b := as(tracer, "POST", "/api/v1/policies", `{"id":"x","name":"x"}`); code != 403 {
		t.Errorf("tracer changes a policy: %d %s", code, b)
	}
	for body, field := range map[string]string{
		`{"minutes":5}`: "supi", `{"supi":"imsi-12","minutes":5}`: "supi", `{"supi":"234300000000001","minutes":0}`: "minutes",
		`{"supi":"234300000000001","gpsi":"447700900123","minutes":5}`: "supi",
		`{"filter":"status >=","minutes":5}`:                           "filter",
	} {
		if code, b := as(tracer, "POST", "/api/v1/traces", body); code != 400 || !strings.Contains(string(b), `"field":"`+field+`"`) {
			t.Errorf("POST %s: %d %s, want 400 on %s", body, code, b, field)
		}
	}
	code, b := as(tracer, "POST", "/api/v1/traces", `{"supi":"234300000000001","minutes":1,"lookback_minutes":5}`)
	var tr struct {
		ID, State, Node string
	}
	if err := json.Unmarshal(b, &tr); code != 201 || err != nil || tr.State != "running" || tr.Node != s.node {
		t.Fatalf("start trace: %d %s; want it running on this node (%s)", code, b, s.node)
	}

	// A trace another node of the store started captures there, where its
	// group alone reads every partition: this node runs no feed of it and
	// sends its downloads there.
	elsewhere := trace.Trace{ID: "tr-elsewhere", SUPI: target, Minutes: 5, CreatedBy: "ops", Node: "sb-other",
		Start: time.Now().UTC(), End: time.Now().UTC().Add(5 * time.Minute), MaxBytes: 1 << 20}
	spec, _ := json.Marshal(elsewhere)
	if err := s.store.CreateTrace(ctx, &store.TraceRecord{Name: elsewhere.ID, Spec: spec}); err != nil {
		t.Fatal(err)
	}

	// After its start: one more of the subscriber, one of another.
	time.Sleep(500 * time.Millisecond)
	produce(other)
	produce(target)
	produce(target, true)

	lines := caughtCopies(t, s, tracer, tr.ID, 8)
	for _, f := range s.dir.mgr.Statuses() {
		if strings.Contains(f.Name, elsewhere.ID) {
			t.Errorf("this node runs feed %s of another node's trace", f.Name)
		}
	}
	if code, b := as(tracer, "GET", "/api/v1/traces/"+elsewhere.ID+"/pcap", ""); code != 409 || !strings.Contains(string(b), "sb-other") {
		t.Errorf("download of another node's trace: %d %s, want 409 naming its node", code, b)
	}
	if len(lines) != 8 {
		t.Errorf("%d copies captured, want the subscriber's 8", len(lines))
	}
	for _, l := range lines {
		if strings.Contains(l, "000000999") {
			t.Errorf("another subscriber's copy captured: %s", l)
		}
	}

	// The pcap, as tshark reads it: four requests, all of the subscriber.
	code, pcap := as(tracer, "GET", "/api/v1/traces/"+tr.ID+"/pcap", "")
	if code != 200 {
		t.Fatalf("pcap: %d %s", code, pcap)
	}
	f := filepath.Join(t.TempDir(), "trace.pcap")
	if err := os.WriteFile(f, pcap, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-r", f, "-Y", `http2.header.name == ":path"`, "-T", "fields", "-e", "http2.header.value").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	reqs := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, "/nudm-ueau/v1/") {
			reqs++
			if !strings.Contains(l, target) {
				t.Errorf("tshark shows another subscriber: %s", l)
			}
		}
	}
	if reqs != 4 {
		t.Errorf("tshark shows %d requests of the subscriber, want 4:\n%s", reqs, out)
	}

	// Stopped, it is ended; the audit log says who traced whom.
	if code, b := as(tracer, "DELETE", "/api/v1/traces/"+tr.ID, ""); code != 200 || !strings.Contains(string(b), `"state":"ended"`) {
		t.Errorf("stop: %d %s", code, b)
	}
	// At most -trace-max (5) run at once on a node; another node's do not
	// count.
	var started []string
	for i := range 6 {
		code, b := as(tracer, "POST", "/api/v1/traces", `{"gpsi":"4477009001`+strconv.Itoa(10+i)+`","minutes":1}`)
		if i < 5 {
			var tr struct{ ID string }
			if err := json.Unmarshal(b, &tr); code != 201 || err != nil {
				t.Fatalf("trace %d of the 5 allowed: %d %s", i+1, code, b)
			}
			started = append(started, tr.ID)
		} else if code != 429 || !strings.Contains(string(b), "-trace-max") {
			t.Errorf("a 6th trace on the node: %d %s, want 429 naming -trace-max", code, b)
		}
	}
	for _, id := range started {
		if code, b := as(tracer, "DELETE", "/api/v1/traces/"+id, ""); code != 200 {
			t.Errorf("stop %s: %d %s", id, code, b)
		}
	}

	code, b = apiDo(t, s, "GET", "/api/v1/audit?resource=traces&limit=1000", "")
	for _, want := range []string{`"action":"start trace"`, `"action":"download trace"`, `"action":"stop trace"`, `"actor":"ops-lawful"`, target} {
		if code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("audit log lacks %s: %d %s", want, code, b)
		}
	}
}

// produceTransaction writes a transaction's request and response copies
// into SCP; in one produce, response first, when reversed (the NF copied
// them from two threads): the response, which does not name the
// subscriber, is read before the request that starts its transaction.
func produceTransaction(t *testing.T, cl *kgo.Client, supi, corr string, reversed bool) {
	t.Helper()
	var recs []*kgo.Record
	for _, dir := range []nfcopy.Direction{nfcopy.RequestIngress, nfcopy.ResponseEgress} {
		c := &nfcopy.Copy{Version: "1.0.0", CorrelationID: corr, Timestamp: time.Now().UnixNano(), Direction: dir,
			NFType: "SCP", NFFQDN: "scp1.5gc.mnc030.mcc234.3gppnetwork.org", ProducerFQDN: "udm1.5gc.mnc030.mcc234.3gppnetwork.org",
			HopByHopID: "1", Body: []byte(`{"servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org"}`)}
		if dir.IsRequest() {
			c.Headers = []nfcopy.Header{{Name: ":method", Values: []string{"POST"}},
				{Name: ":path", Values: []string{"/nudm-ueau/v1/" + supi + "/security-information/generate-auth-data"}}}
		} else {
			c.Headers = []nfcopy.Header{{Name: ":status", Values: []string{"200"}}}
		}
		recs = append(recs, &kgo.Record{Topic: "SCP", Value: nfcopy.AppendJSON(nil, c)})
	}
	ctx := context.Background()
	if reversed {
		recs[0], recs[1] = recs[1], recs[0]
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// A node restarted while its trace runs goes on where the trace's feeds
// had committed (an external Kafka keeps the trace's groups): the copies
// sent while it was down are caught after, and none twice.
func TestTraceResumesAfterRestart(t *testing.T) {
	t.Parallel()
	br, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0",
		Topics: []broker.TopicSpec{{Name: "SCP", Partitions: 4}, {Name: "NRF", Partitions: 2}, {Name: "SEPP", Partitions: 2}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	cfg := testConfig(t, t.TempDir(), true)
	cfg.KafkaBrokers = strings.Join(br.ClientConfig().Brokers, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.ClientConfig().Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const supi = "imsi-234300000000042"
	n := 0
	produce := func(k int) {
		for range k {
			n++
			produceTransaction(t, cl, supi, fmt.Sprintf("tx-%d", n), false)
		}
	}
	caught := func(s *Server, id string, want int) {
		t.Helper()
		if got := len(caughtCopies(t, s, s.AdminToken(), id, want)); got != want {
			t.Errorf("the trace holds %d copies, want %d", got, want)
		}
	}

	produce(2)
	s := startServer(t, cfg)
	code, b := apiDo(t, s, "POST", "/api/v1/traces", `{"supi":"`+supi+`","minutes":5,"lookback_minutes":5}`)
	var tr struct{ ID string }
	if err := json.Unmarshal(b, &tr); code != 201 || err != nil {
		t.Fatalf("start trace: %d %s", code, b)
	}
	produce(1)
	caught(s, tr.ID, 6)
	s.Shutdown()

	produce(2) // while the node is down
	s = startServer(t, cfg)
	defer s.Shutdown()
	produce(1)
	caught(s, tr.ID, 12)
}

// caughtCopies waits for a trace to hold at least want copies as JSON
// lines (read with token, each read audited), then a rotation more for
// anything else to come, and returns the lines it holds then.
func caughtCopies(t *testing.T, s *Server, token, id string, want int) []string {
	t.Helper()
	read := func() []string {
		time.Sleep(250 * time.Millisecond) // each download is audited
		_, b := apiAs(t, s, token, "GET", "/api/v1/traces/"+id+"/jsonl", "")
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	testkit.WaitForState(t, 30*time.Second, fmt.Sprintf("%d copies in trace %s", want, id), func() (bool, string) {
		n := len(read())
		return n >= want, fmt.Sprintf("%d copies", n)
	})
	time.Sleep(3 * time.Second) // a rotation more: nothing else comes
	return read()
}
