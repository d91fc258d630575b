package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// TestDirectorPoisonPill: a 1.5 MB copy, produced zstd-compressed by kcat
// (librdkafka) so the broker takes it, cannot be produced by a kafka feed
// (over the 1 MB limit uncompressed). The feed must set it aside to the
// dead-letter topic with the reason and go on: every other copy delivered
// exactly once, the feed connected, the copy counted as undeliverable.
func TestDirectorPoisonPill(t *testing.T) {
	t.Parallel()
	// An exactly-once feed's first transaction over the big copy aborts;
	// the next dead-letters it and commits the rest.
	for _, once := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[once], func(t *testing.T) { poisonPill(t, once) })
	}
}

func poisonPill(t *testing.T, once bool) {
	kcat := testkit.Tool(t, "kcat")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	createFeed(t, s, `{"name":"lake","type":"kafka","sources":["SCP"],"topic":"POISON-OUT","start":"earliest","exactly_once":`+strconv.FormatBool(once)+`}`)
	out := newKafkaCounter(t, ctx, s.KafkaAddrs(), "POISON-OUT")
	seq := 0

	tmpl, err := os.ReadFile("../../examples/copy.json")
	if err != nil {
		t.Fatal(err)
	}
	record := func(id, pad string) string {
		r := strings.Replace(string(tmpl), "ff561bdb-5a3c-4c1e-9d2a-0c6b7e3f1a21", id, 1)
		seq++
		r = strings.Replace(r, `"header-list":{`, fmt.Sprintf(`"header-list":{"x-signalbox-seq":["%s/%d"],`, id, seq), 1)
		if pad != "" {
			r = strings.Replace(r, `"5g-sbi-message":"{`, `"5g-sbi-message":"{\"pad\":\"`+pad+`\",`, 1)
		}
		return strings.TrimSpace(r)
	}
	var lines []string
	for i := range 20 {
		if i == 10 {
			lines = append(lines, record("poison/big", strings.Repeat("a", 1_500_000)))
		}
		lines = append(lines, record(fmt.Sprintf("poison/%d", i), ""))
	}
	kcatProduce(t, kcat, s, lines, "-z", "zstd", "-X", "message.max.bytes=4000000", "-X", "batch.size=4000000")

	testkit.WaitForState(t, 30*time.Second, "the 20 copies delivered", func() (bool, string) {
		u, d := out.counts("poison/")
		return u >= 20, fmt.Sprintf("unique=%d dups=%d", u, d)
	})
	// Nothing more arrives: no retry loop re-producing the batch.
	time.Sleep(2 * time.Second)
	if u, d := out.counts("poison/"); u != 20 || d != 0 {
		t.Fatalf("kafka feed: unique=%d dups=%d, want the 20 small copies once", u, d)
	}
	var st struct {
		Status struct {
			State         string
			Undeliverable uint64
		}
	}
	testkit.WaitFor(t, 10*time.Second, "feed status", func() bool {
		_, b := apiDo(t, s, "GET", "/api/v1/feeds/lake/status", "")
		return json.Unmarshal(b, &st) == nil && st.Status.Undeliverable == 1
	})
	if st.Status.State != "connected" {
		t.Errorf("feed state %q after setting the copy aside", st.Status.State)
	}

	// The dead letter names the copy and why.
	dlq := kafkatest.NewReader(t, broker.ClientConfig{Brokers: s.KafkaAddrs()}, []string{broker.DLQTopic}).Read(1, 10*time.Second)
	dead := dlq[len(dlq)-1]
	hdr := map[string]string{}
	for _, h := range dead.Headers {
		hdr[h.Key] = string(h.Value)
	}
	if string(dead.Key) != "poison/big" || hdr["signalbox-reason"] != "undeliverable" || !strings.Contains(hdr["signalbox-error"], "too large") ||
		hdr["signalbox-feed"] != "lake" || hdr["signalbox-truncated"] != "true" {
		t.Errorf("dead letter key %q headers %v", dead.Key, hdr)
	}
	_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
	if !strings.Contains(m, `signalbox_feed_undeliverable_total{feed="lake"} 1`) {
		t.Error("metrics lack signalbox_feed_undeliverable_total{feed=\"lake\"} 1")
	}
}

// TestDirectorRelaysIncompleteCopies: records as NFs really write them — a
// response copy without :status, an unknown direction, a header value that
// is a lone string or a number — are still copies. A kafka feed relays
// them as they are; a synthetic feed encodes what it can (the lone string
// is one value) and skips, counting, what it cannot; only a record that is
// not a copy at all goes to the dead-letter topic.
func TestDirectorRelaysIncompleteCopies(t *testing.T) {
	t.Parallel()
	kcat := testkit.Tool(t, "kcat")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	synth := startProbe(t, ctx, probe.ModeSynthetic)
	createFeed(t, s, `{"name":"relay","type":"kafka","sources":["SCP"],"topic":"RELAY-OUT","start":"earliest"}`)
	createFeed(t, s, `{"name":"pkts","type":"synthetic","sources":["SCP"],"endpoint":"`+synth.Addr()+`","start":"earliest"}`)
	out := newKafkaCounter(t, ctx, s.KafkaAddrs(), "RELAY-OUT")

	meta := func(id, dir string) string {
		return `"metadata-list":{"correlation-id":"` + id + `","timestamp":"1678705695995010066","message-direction":"` + dir +
			`","feed-source":{"nf-type":"SCP","nf-fqdn":"scp1.example"}}`
	}
	seq := func(id string) string { return `"x-signalbox-seq":["relay/` + id + `"]` }
	lines := []string{
		`{"version":"1.0.0",` + meta("ok", "REQUEST_INGRESS") + `,"header-list":{":method":["GET"],":path":["/nnrf-disc/v1/nf-instances"],` + seq("1") + `}}`,
		`{"version":"1.0.0",` + meta("nostatus", "RESPONSE_EGRESS") + `,"header-list":{"content-type":["application/json"],` + seq("2") + `},"5g-sbi-message":"{}"}`,
		`{"version":"1.0.0",` + meta("weird-dir", "SIDEWAYS") + `,"header-list":{":method":["GET"],":path":["/x"],` + seq("3") + `}}`,
		`{"version":"1.0.0",` + meta("scalar", "REQUEST_INGRESS") + `,"header-list":{":method":"POST",":path":"/npcf-smpolicycontrol/v1/sm-policies",` + seq("4") + `}}`,
		`{"version":"1.0.0",` + meta("number", "REQUEST_INGRESS") + `,"header-list":{":method":["GET"],":path":["/y"],"content-length":[42],` + seq("5") + `}}`,
		`this is not a copy`,
	}
	kcatProduce(t, kcat, s, lines, "-z", "lz4")
	testkit.WaitForState(t, 30*time.Second, "the five copies relayed", func() (bool, string) {
		u, d := out.counts("relay/")
		return u >= 5, fmt.Sprintf("unique=%d dups=%d", u, d)
	})
	testkit.WaitForState(t, 30*time.Second, "the encodable copies as packets", func() (bool, string) {
		r := synth.Snapshot()
		return r.Unique >= 2, probeState(synth)
	})
	time.Sleep(time.Second)
	if u, d := out.counts("relay/"); u != 5 || d != 0 {
		t.Errorf("kafka feed: unique %d dups %d, want the 5 copies once", u, d)
	}
	if r := synth.Snapshot(); r.Unique != 2 || r.Invalid != 0 {
		t.Errorf("synthetic feed: %s, want the complete copy and the lone-string one", probeState(synth))
	}
	_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{
		`signalbox_feed_incomplete_copies_total{action="relayed",feed="relay",reason="missing_field"} 1`,
		`signalbox_feed_incomplete_copies_total{action="relayed",feed="relay",reason="bad_direction"} 1`,
		`signalbox_feed_incomplete_copies_total{action="relayed",feed="relay",reason="bad_type"} 1`,
		`signalbox_feed_incomplete_copies_total{action="skipped",feed="pkts",reason="missing_field"} 1`,
		`signalbox_copy_invalid_total{reason="syntax",topic="SCP"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestDirectorSequencing: transactions copied response first, fetched in
// one poll: a feed with sequencing "transaction" writes each request first,
// and counts the move.
//
// Sequencing works within what one poll fetched. The copies go in one
// record batch (one partition, the responses first) once the feed reads, so
// one fetch holds them all. Copies in two partitions, even produced in one
// request, were fetched in two polls when the feed was already waiting
// (every time, on kfake), and sometimes when it started from the earliest
// offset behind them: a test of that would test the fetch, not sequencing.
func TestDirectorSequencing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	rec := func(id, dir, hdrs string) string {
		return `{"version":"1.0.0","metadata-list":{"correlation-id":"` + id + `","hop-by-hop-id":"1","timestamp":"1678705695995010066",` +
			`"message-direction":"` + dir + `","feed-source":{"nf-type":"SCP","nf-instance-id":"scp-1"}},"header-list":{` + hdrs + `}}`
	}
	const n = 20
	var resps, reqs []string
	for i := range n {
		id := fmt.Sprintf("seq-%d", i)
		resps = append(resps, rec(id, "RESPONSE_EGRESS", `":status":["200"]`))
		reqs = append(reqs, rec(id, "REQUEST_INGRESS", `":method":["GET"],":path":["/x"]`))
	}
	createFeed(t, s, `{"name":"ordered","type":"kafka","sources":["SCP"],"topic":"ORDERED","sequencing":"transaction"}`)
	nf, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.ProducerLinger(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	// A transaction in order first, to see the feed deliver.
	warm := []*kgo.Record{{Topic: "SCP", Partition: 1, Value: []byte(rec("warm", "REQUEST_INGRESS", `":method":["GET"],":path":["/x"]`))},
		{Topic: "SCP", Partition: 1, Value: []byte(rec("warm", "RESPONSE_EGRESS", `":status":["200"]`))}}
	if err := nf.ProduceSync(ctx, warm...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForState(t, 30*time.Second, "the feed to deliver", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/feeds/ordered/status", "")
		return strings.Contains(string(b), `"delivered":2,`), string(b)
	})
	var recs []*kgo.Record
	for i := range n { // the responses first
		recs = append(recs, &kgo.Record{Topic: "SCP", Partition: 0, Value: []byte(resps[i])})
	}
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "SCP", Partition: 0, Value: []byte(reqs[i])})
	}
	if err := nf.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// correlation id -> direction of its first copy in the output
	first := map[string]string{}
	out := kafkatest.NewReader(t, broker.ClientConfig{Brokers: s.KafkaAddrs()}, []string{"ORDERED"}).Read(2*n+2, 30*time.Second)
	for _, r := range out {
		var c struct {
			MD struct {
				ID  string `json:"correlation-id"`
				Dir string `json:"message-direction"`
			} `json:"metadata-list"`
		}
		if json.Unmarshal(r.Value, &c) == nil {
			if _, ok := first[c.MD.ID]; !ok {
				first[c.MD.ID] = c.MD.Dir
			}
		}
	}
	var st struct{ Status struct{ Reordered uint64 } }
	_, b := apiDo(t, s, "GET", "/api/v1/feeds/ordered/status", "")
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status.Reordered == 0 {
		t.Fatalf("nothing reordered: the copies were not fetched in one poll, or sequencing is off (%s)", b)
	}
	bad := 0
	for id, dir := range first {
		if dir != "REQUEST_INGRESS" {
			bad++
			t.Logf("%s: first out %s", id, dir)
		}
	}
	t.Logf("%d of %d responses moved after their request", st.Status.Reordered, n)
	if moved := int(st.Status.Reordered); bad > n-moved {
		t.Errorf("%d transactions out response first; %d responses were moved after their request", bad, moved)
	}
}

// kcatProduce produces lines, one record each, into the SCP topic of s's
// embedded broker with kcat (librdkafka), with kcat's extra args.
func kcatProduce(t *testing.T, kcat string, s *Server, lines []string, args ...string) {
	t.Helper()
	kcatProduceTo(t, kcat, s, "SCP", lines, args...)
}

// kcatProduceTo produces lines, one record each, into topic with kcat.
func kcatProduceTo(t *testing.T, kcat string, s *Server, topic string, lines []string, args ...string) {
	t.Helper()
	kcatProduceAt(t, kcat, s.KafkaAddrs()[0], topic, lines, args...)
}
