package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestDirectorDiameter: a DRA's Diameter copies, produced with kcat into the
// DIAMETER topic, go through serve to three feeds: a synthetic feed
// filtered to S6a, whose stream stock tshark decodes as Diameter with each
// answer paired to its request; a kafka feed relaying every copy, broken
// ones too; an xdr feed whose records join each request to its answer.
// Broken Diameter messages are counted, and stall nothing.
func TestDirectorDiameter(t *testing.T) {
	t.Parallel()
	kcat := testkit.Tool(t, "kcat")
	tshark := testkit.Tool(t, "tshark")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir(), true))
	defer s.Shutdown()
	p, pcap := startPCAPProbe(t, ctx)
	createFeed(t, s, `{"name":"dia-wire","type":"synthetic","sources":["DIAMETER"],"filter":"diameter.app_id == 16777251","endpoint":"`+p.Addr()+`","start":"earliest"}`)
	createFeed(t, s, `{"name":"dia-lake","type":"kafka","sources":["DIAMETER"],"topic":"DIA-OUT","start":"earliest"}`)
	createFeed(t, s, `{"name":"dia-tx","type":"xdr","sources":["DIAMETER"],"topic":"DIA-XDR","start":"earliest","xdr":{"timeout":"5s","linger":"100ms"}}`)
	relayed := newTopicReader(t, ctx, s.KafkaAddrs(), "DIA-OUT")
	records := newTopicReader(t, ctx, s.KafkaAddrs(), "DIA-XDR")

	const n = 200
	g := nfsim.NewDiameterGen(11)
	var lines []string
	s6a, want := 0, map[string]nfsim.DiameterTxn{}
	ts := time.Now().UnixNano()
	for i := range n {
		tx, err := g.Next(ts+int64(i)*1_000_000, 2_000_000)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(tx.Request), string(tx.Answer))
		if tx.AppID == nfsim.AppS6a {
			s6a++
		}
		want[fmt.Sprintf("dia-%08x-%08x", tx.HopByHop, tx.EndToEnd)] = tx
	}
	broken := func(field, msg string) string {
		return `{"version":"1.0.0","metadata-list":{"timestamp":"` + fmt.Sprint(ts) + `","message-direction":"REQUEST_INGRESS",` +
			`"feed-source":{"nf-type":"DRA","nf-fqdn":"dra1"}},"` + field + `":"` + msg + `"}`
	}
	short := base64.StdEncoding.EncodeToString([]byte{1, 0, 0, 12, 0x80, 0, 1, 0x3c, 0, 0, 0, 0})
	past := base64.StdEncoding.EncodeToString([]byte{1, 0, 0, 28, 0x80, 0, 1, 0x3c, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
		0, 0, 1, 7, 0x40, 0, 1, 0})
	lines = append(lines[:n], append([]string{broken("diameter-message", short), broken("diameter-message", past),
		broken("diameter-message-hex", "zz")}, lines[n:]...)...)
	kcatProduceTo(t, kcat, s, "DIAMETER", lines, "-p", "0", "-z", "lz4") // one partition: each answer after its request

	testkit.WaitForState(t, 30*time.Second, "every copy relayed, every transaction recorded, S6a at the probe", func() (bool, string) {
		r := p.Snapshot()
		return relayed.count() >= len(lines) && records.count() >= n && r.Received >= int64(2*s6a),
			fmt.Sprintf("relayed %d/%d records %d/%d probe %s", relayed.count(), len(lines), records.count(), n, probeState(p))
	})
	time.Sleep(500 * time.Millisecond)
	if got := relayed.count(); got != len(lines) {
		t.Errorf("kafka feed relayed %d copies, want %d", got, len(lines))
	}
	if r := p.Snapshot(); r.Received != int64(2*s6a) || r.Invalid != 0 || r.PerNF["DIAMETER"] != int64(2*s6a) {
		t.Errorf("probe: %s, want %d S6a messages", probeState(p), 2*s6a)
	}
	for _, raw := range records.values() {
		var r xdr.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("xdr record %s: %v", raw, err)
		}
		tx, ok := want[r.CorrelationID]
		if !ok || r.Protocol != "diameter" || r.Diameter == nil || r.Result != xdr.ResultComplete || r.Diameter.Command != tx.Command ||
			uint32(r.Status) != tx.ResultCode || r.SUPI != "imsi-"+tx.IMSI || r.LatencyNs != 2_000_000 {
			t.Fatalf("xdr record %s, want %+v", raw, tx)
		}
		delete(want, r.CorrelationID)
	}
	if len(want) != 0 {
		t.Errorf("%d transactions without a record", len(want))
	}
	_, m := get(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, reason := range []string{"bad_diameter_header", "bad_avp", "bad_encoding"} {
		for _, w := range []string{
			`signalbox_feed_incomplete_copies_total{action="relayed",feed="dia-lake",reason="` + reason + `"} 1`,
			`signalbox_feed_incomplete_copies_total{action="skipped",feed="dia-tx",reason="` + reason + `"} 1`,
		} {
			if !strings.Contains(m, w) {
				t.Errorf("metrics lack %s", w)
			}
		}
	}
	cancel()
	p.Close()

	out, err := exec.Command(tshark, "-r", pcap, "-n", "-2", "-Y", "diameter", "-T", "fields", "-E", "separator=|",
		"-e", "diameter.applicationId", "-e", "diameter.flags.request", "-e", "diameter.answer_in", "-e", "diameter.answer_to").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	reqs, paired := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 4 || f[0] != "16777251" {
			t.Fatalf("tshark: %q", line)
		}
		if f[1] == "1" || f[1] == "True" {
			reqs++
			if f[2] != "" {
				paired++
			}
		}
	}
	if reqs != s6a || paired != s6a {
		t.Errorf("tshark decoded %d S6a requests, %d paired with their answer; want %d", reqs, paired, s6a)
	}
}

// topicReader keeps every record value of a topic.
type topicReader struct {
	mu   sync.Mutex
	vals [][]byte
}

func newTopicReader(t *testing.T, ctx context.Context, brokers []string, topic string) *topicReader {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	tr := &topicReader{}
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				tr.mu.Lock()
				tr.vals = append(tr.vals, r.Value)
				tr.mu.Unlock()
			})
		}
	}()
	t.Cleanup(cl.Close)
	return tr
}

func (tr *topicReader) count() int { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.vals) }

func (tr *topicReader) values() [][]byte {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([][]byte(nil), tr.vals...)
}
