package director

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// A checkpoint decodes to what was encoded; anything else is refused with
// the reason.
func TestCheckpointCodec(t *testing.T) {
	for _, cp := range []checkpoint{
		{next: 0},
		{next: 1 << 40},
		{next: 1000, open: []int64{3, 4, 900, 999}},
	} {
		got, err := parseCheckpoint(cp.appendTo(nil))
		if err != nil || !got.equal(&cp) {
			t.Errorf("%+v: decoded %+v, %v", cp, got, err)
		}
		want := cp.next
		if len(cp.open) > 0 {
			want = cp.open[0]
		}
		if got.commit() != want {
			t.Errorf("%+v: commit %d, want %d", cp, got.commit(), want)
		}
	}
	good := (&checkpoint{next: 10, open: []int64{2, 5}}).appendTo(nil)
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":          {nil, "version 1"},
		"version":        {append([]byte{2}, good[1:]...), "version 1"},
		"truncated":      {[]byte{1, 0x80}, "truncated"},
		"short":          {good[:len(good)-1], "open offsets in"},
		"trailing":       {append(good, 0), "after the open offsets"},
		"count too big":  {[]byte{1, 10, 200, 1}, "open offsets in"},
		"not ascending":  {[]byte{1, 10, 2, 5, 0}, "not above"},
		"not below next": {[]byte{1, 10, 1, 10}, "below next"},
	} {
		_, err := parseCheckpoint(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", name, err, tc.want)
		}
	}
	for _, k := range []tp{{"SCP", 0}, {"a/b", 11}} {
		if got, ok := parseCheckpointKey(checkpointKey(k)); !ok || got != k {
			t.Errorf("key %v: parsed %v %v", k, got, ok)
		}
	}
	for _, bad := range []string{"", "SCP", "/1", "SCP/x", "SCP/-1"} {
		if _, ok := parseCheckpointKey([]byte(bad)); ok {
			t.Errorf("key %q parsed", bad)
		}
	}
}

// FuzzParseCheckpoint: any bytes decode or are refused, never panic, and
// what decodes encodes back to the same bytes.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add((&checkpoint{next: 1000, open: []int64{3, 4, 900}}).appendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := parseCheckpoint(b)
		if err != nil {
			return
		}
		if got := cp.appendTo(nil); string(got) != string(b) {
			// Varints have one shortest form; a longer one decodes too.
			if again, err := parseCheckpoint(got); err != nil || !again.equal(&cp) {
				t.Fatalf("%x decoded to %+v, which encodes to %x", b, cp, got)
			}
		}
	})
}

// readCheckpoints finds the last committed checkpoint of each partition,
// leaves out an aborted transaction's, and reads the same after the broker
// compacted the topic (its markers and older checkpoints gone).
func TestCheckpointsReadAfterCompaction(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	h := newHarness(t, c)
	f := &feed{m: h.m, spec: runPlan{FeedSpec: FeedSpec{Name: "cp"}}, log: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := CheckpointTopic("cp")
	if err := broker.EnsureTopics(ctx, h.m.admin, []broker.TopicSpec{checkpointTopicSpec("cp")}, true); err != nil {
		t.Fatal(err)
	}
	cl, err := c.ClientConfig().NewClient(kgo.TransactionalID("cp-test"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(commit bool, cps map[tp]checkpoint) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k, cp := range cps {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: checkpointKey(k), Value: cp.appendTo(nil)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	a, b := tp{"SCP", 0}, tp{"SCP", 1}
	for i := int64(1); i <= 200; i++ {
		cps := map[tp]checkpoint{a: {next: 10 * i, open: []int64{10*i - 5}}}
		if i%2 == 0 {
			cps[b] = checkpoint{next: 7 * i}
		}
		write(true, cps)
	}
	write(false, map[tp]checkpoint{a: {next: 99999}}) // aborted: never read
	want := map[tp]checkpoint{a: {next: 2000, open: []int64{1995}}, b: {next: 1400}}
	check := func(when string) {
		t.Helper()
		got, err := f.readCheckpoints(ctx, kadm.NewClient(h.m.admin))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d checkpoints, want %d: %v", when, len(got), len(want), got)
		}
		for k, w := range want {
			if g := got[k]; !g.equal(&w) {
				t.Errorf("%s: %v: %+v, want %+v", when, k, g, w)
			}
		}
	}
	check("as written")
	c.kfake.Compact()
	if n := countRecords(t, c, topic); n > 10 {
		t.Errorf("%d records after compaction: not compacted, the test reads nothing new", n)
	}
	check("after compaction")
	// And after a last checkpoint written once compacted.
	write(true, map[tp]checkpoint{b: {next: 5000}})
	want[b] = checkpoint{next: 5000}
	c.kfake.Compact()
	check("written after compaction")
}

// countRecords is how many data records topic holds (all of them, aborted
// too), read from its start.
func countRecords(t *testing.T, c *testCluster, topic string) int {
	t.Helper()
	cl, err := c.ClientConfig().NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			return n
		}
		n += fs.NumRecords()
	}
}

// A feed whose output topic refuses one record as too large: the record
// goes to the dead letters, counted as undeliverable, and the others go out
// once. Exactly-once: the transaction with it aborts and the next
// dead-letters it. At-least-once: the kafka sink sets it aside, and the feed
// dead-letters it; an xdr feed's correlating stage does so right after the
// delivery (it holds the record only until its next one).
func TestRecordTooLarge(t *testing.T) {
	for _, c := range []struct {
		typ  string
		once bool
	}{{TypeKafka, true}, {TypeKafka, false}, {TypeXDR, true}, {TypeXDR, false}} {
		t.Run(c.typ+"/"+map[bool]string{true: "exactly-once", false: "at-least-once"}[c.once], func(t *testing.T) {
			t.Parallel()
			recordTooLarge(t, c.typ, c.once)
		})
	}
}

func recordTooLarge(t *testing.T, typ string, once bool) {
	c := startCluster(t, kfakeCluster, 1)
	h := newHarness(t, c, func(cfg *Config) { cfg.CreateTopics = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// An xdr record is small; a copy feed's batch of 3 KB copies (lz4) must
	// fit but for the one too large.
	limit := map[string]string{TypeXDR: "3000", TypeKafka: "3800"}[typ]
	small := broker.TopicSpec{Name: "out.small", Partitions: 1, Configs: map[string]string{"max.message.bytes": limit}}
	if err := broker.EnsureTopics(ctx, h.m.admin, []broker.TopicSpec{small}, true); err != nil {
		t.Fatal(err)
	}
	spec := FeedSpec{Name: "big", Type: typ, Sources: []string{"NRF"}, KafkaSpec: KafkaSpec{Topic: small.Name}, ExactlyOnce: once, Start: "earliest"}
	if typ == TypeXDR {
		spec.XDR = &XDRSpec{Timeout: "1s"}
	}
	h.apply(spec)
	if once { // an at-least-once feed is connected at its first delivery
		testkit.WaitFor(t, 20*time.Second, "the feed to read", func() bool { return h.status("big").State == StateConnected })
	}
	pcl := producer(t, c)
	var recs []*kgo.Record
	for i := range 21 {
		id := fmt.Sprintf("big-%d", i)
		req := fixture.Record(id, "NRF", nfcopy.RequestIngress)
		if i == 10 {
			var cp nfcopy.Copy
			if err := nfcopy.Decode(req, &cp); err != nil {
				t.Fatal(err)
			}
			noise := make([]byte, 4000) // incompressible: the batch is lz4
			rand.New(rand.NewSource(1)).Read(noise)
			cp.Headers[1].Values = []string{"/nudm-ueau/v1/" + hex.EncodeToString(noise)}
			req = nfcopy.AppendJSON(nil, &cp)
		}
		recs = append(recs, &kgo.Record{Topic: "NRF", Value: req})
		if typ == TypeXDR { // a copy feed passes only the requests: one record each
			recs = append(recs, &kgo.Record{Topic: "NRF", Value: fixture.Record(id, "NRF", nfcopy.ResponseEgress)})
		}
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := newOutputReader(t, c, small.Name)
	dlq := newOutputReader(t, c, broker.DLQTopic)
	testkit.WaitForState(t, 30*time.Second, "20 records out, one dead-lettered", func() (bool, string) {
		u, d := out.counts("big-")
		l, _ := dlq.counts("big-10")
		return u == 20 && l == 1, fmt.Sprintf("%d out (%d twice), %d dead-lettered", u, d, l)
	})
	if u, d := out.counts("big-"); u != 20 || d != 0 {
		t.Errorf("%d records out, %d twice", u, d)
	}
	if u, _ := out.counts("big-10"); u != 0 {
		t.Error("the record too large came out")
	}
	if st := h.status("big"); st.Undeliverable != 1 {
		t.Errorf("undeliverable %d, want 1", st.Undeliverable)
	}
}
