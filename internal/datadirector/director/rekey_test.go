package director

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// TestXDRRekeyAcrossNodes: two signalbox nodes share a re-keyed xdr feed.
// Each transaction has SCP copies (4 trigger points) and NRF copies (2) in
// different NF topics, whose partitions the two nodes split between them;
// re-keying by correlation id still brings all six copies to one correlator,
// so every transaction becomes exactly one complete record.
func TestXDRRekeyAcrossNodes(t *testing.T) {
	b := startBroker(t, broker.Config{})
	spec := FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, KafkaSpec: KafkaSpec{Topic: "probe.out"},
		XDR: &XDRSpec{Timeout: "10s", Linger: "300ms", Rekey: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := make([]*Manager, 2)
	for i := range nodes {
		m, err := NewManager(Config{Client: b.ClientConfig(), Topics: testTopics[:3], Registerer: prometheus.NewRegistry(),
			Logger: testLogger(t), CreateTopics: true, LagInterval: 200 * time.Millisecond,
			BackoffMin: 50 * time.Millisecond, BackoffMax: 400 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = m.Run(mctx); close(done) }()
		t.Cleanup(func() { mcancel(); <-done })
		nodes[i] = m
	}
	if err := nodes[0].Prepare(ctx, &spec); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for _, m := range nodes {
		if err := m.Apply(ctx, []FeedSpec{spec}); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	if st, ok := nodes[0].Status("tx.rekey"); !ok || st.Type != TypeKafka {
		t.Fatalf("first stage missing: %+v %v", st, ok)
	}
	// Both nodes are members of the correlating stage's group, each with
	// partitions of the re-key topic, before anything is produced.
	group := nodes[0].cfg.GroupPrefix + spec.Name
	testkit.WaitForState(t, 30*time.Second, "both nodes to hold partitions of "+group, func() (bool, string) {
		gs, err := nodes[0].adm.DescribeGroups(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		g := gs[group]
		if g.State != "Stable" || len(g.Members) != 2 {
			return false, fmt.Sprintf("state %s, %d members", g.State, len(g.Members))
		}
		for _, mem := range g.Members {
			ca, ok := mem.Assigned.AsConsumer()
			if !ok || len(ca.Topics) == 0 {
				return false, "a member without partitions"
			}
		}
		return true, ""
	})

	cl := producer(t, b)
	const n = 200
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("tx-%03d", i)
		for _, c := range []struct {
			nf  string
			dir nfcopy.Direction
		}{{"SCP", nfcopy.RequestIngress}, {"SCP", nfcopy.RequestEgress}, {"NRF", nfcopy.RequestIngress},
			{"NRF", nfcopy.ResponseEgress}, {"SCP", nfcopy.ResponseIngress}, {"SCP", nfcopy.ResponseEgress}} {
			// Keys differ per NF topic, as different NF vendors' producers
			// would partition: without re-keying the copies of one
			// transaction land on partitions owned by different nodes.
			key := []byte(c.nf + "/" + id)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: c.nf, Key: key, Value: fixture.Record(id, c.nf, c.dir)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, total := countTopic(t, b.ClientConfig(), "probe.out", n)
	if len(keys) != n || total != n {
		t.Fatalf("records: %d distinct, %d total; want %d, one per transaction", len(keys), total, n)
	}
	rc, err := b.ClientConfig().NewClient(kgo.ConsumeTopics("probe.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	read := 0
	for read < n && ctx.Err() == nil {
		rc.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			read++
			var rec xdr.Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("record: %v", err)
			}
			if rec.Result != "complete" || rec.Copies != 6 {
				t.Errorf("transaction %s: result %s with %d copies, want complete with 6", rec.CorrelationID, rec.Result, rec.Copies)
			}
		})
	}
	// Both nodes took part in correlating.
	var worked int
	for _, m := range nodes {
		if st, ok := m.Status("tx"); ok && st.Records > 0 {
			worked++
		}
	}
	if worked != 2 {
		t.Errorf("%d of 2 nodes correlated, though both held partitions of the re-key topic", worked)
	}
}

// The re-key topic is made with explicit partitions, retention and segment
// size (the feed's, else signalbox's defaults), not the cluster's.
func TestRekeyTopicSettings(t *testing.T) {
	b := startBroker(t, broker.Config{})
	m, err := NewManager(Config{Client: b.ClientConfig(), Topics: testTopics[:3], Registerer: prometheus.NewRegistry(),
		Logger: testLogger(t), CreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(mctx); close(done) }()
	defer func() { mcancel(); <-done }()
	specs := []FeedSpec{
		{Name: "tx-default", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}, XDR: &XDRSpec{Rekey: true}},
		{Name: "tx-tuned", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "probe.out"},
			XDR: &XDRSpec{Rekey: true, RekeyPartitions: 3, RekeyRetention: "20m", RekeySegmentBytes: 8 << 20}},
	}
	for i := range specs {
		if err := m.Validate(&specs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Apply(ctx, specs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		feed           string
		partitions     int
		retention, seg string
	}{{"tx-default", 12, "3600000", "67108864"}, {"tx-tuned", 3, "1200000", "8388608"}} {
		topic := RekeyTopic(tc.feed)
		td, err := m.adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(td[topic].Partitions); got != tc.partitions {
			t.Errorf("%s: %d partitions, want %d", topic, got, tc.partitions)
		}
		rc, err := m.adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, kv := range c.Configs {
			got[kv.Key] = kv.MaybeValue()
		}
		if got["retention.ms"] != tc.retention || got["segment.bytes"] != tc.seg || got["cleanup.policy"] != "delete" {
			t.Errorf("%s: retention.ms %q segment.bytes %q cleanup.policy %q; want %s, %s, delete",
				topic, got["retention.ms"], got["segment.bytes"], got["cleanup.policy"], tc.retention, tc.seg)
		}
	}
	bad := FeedSpec{Name: "tx-bad", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}, XDR: &XDRSpec{Rekey: true, RekeyRetention: "5s"}}
	if err := m.Validate(&bad); err == nil || !strings.Contains(err.Error(), "rekey_retention") {
		t.Errorf("a 5s re-key retention: %v", err)
	}
}
