package director

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
	"github.com/signalbox/signalbox/internal/xdr"
)

// TestXDRRekeyAcrossNodes: two signalbox nodes share a re-keyed xdr feed.
// Each transaction has SCP copies (4 trigger points) and NRF copies (2) in
// different NF topics, whose partitions the two nodes split between them;
// re-keying by correlation id still brings all six copies to one correlator,
// so every transaction becomes exactly one complete record.
func TestXDRRekeyAcrossNodes(t *testing.T) {
	b := startBroker(t, broker.Config{})
	spec := FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, Topic: "probe.out",
		XDR: &XDRSpec{Timeout: "10s", Linger: "300ms", Rekey: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := make([]*Manager, 2)
	for i := range nodes {
		m, err := NewManager(Config{Client: b.ClientConfig(), Topics: testTopics[:3], Registerer: prometheus.NewRegistry(),
			Logger: testLogger(), CreateTopics: true, LagInterval: 200 * time.Millisecond,
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
