package site

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// TestPositionsAtTheEdges: the translations a takeover and a hand-back
// rest on, where the mirror has nothing yet or has not caught up.
//   - A position in an empty mirrored partition (the partition was idle)
//     is the origin partition's start, not unknown: the feed there has
//     read none of it.
//   - A released feed's position past what is mirrored is not exact (the
//     peer would deliver again what is still to come), and is once the
//     mirror has caught up.
//   - A gap of control records only (a transactional producer's commit
//     markers) between the last copy mirrored and the position is no
//     copy still to come: exact.
func TestPositionsAtTheEdges(t *testing.T) {
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 1}, {Name: "NRF", Partitions: 1}}
	local := kafkatest.StartBroker(t, broker.Config{Topics: topics})
	remote := kafkatest.StartBroker(t, broker.Config{})
	cfg := MirrorConfig{Site: "east", Peer: "west", Local: local.ClientConfig(), Remote: remote.ClientConfig(),
		Topics: topics, Registerer: prometheus.NewRegistry(), Logger: testkit.Logger()}
	ctx := context.Background()
	m := NewMirror(cfg)
	if err := m.checkTopics(ctx); err != nil {
		t.Fatal(err)
	}

	// Empty: east.SCP/0 at west holds nothing.
	if o, ok := m.LocalOffset(ctx, "SCP", 0, 0); !ok || o != 0 {
		t.Fatalf("LocalOffset in an empty mirrored partition = %d, %v; want 0 (the origin's start)", o, ok)
	}
	if d, exact, err := m.PeerPosition(ctx, "SCP", 0, 0); err != nil || !exact || d != 0 {
		t.Fatalf("PeerPosition(SCP/0, 0) with nothing anywhere = %d, %v, %v; want 0, exact", d, exact, err)
	}

	// Ten copies here, none mirrored yet: a position after them is pending.
	pl := mustClient(t, local.ClientConfig(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := pl.ProduceSync(ctx, &kgo.Record{Topic: "SCP", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, exact, err := m.PeerPosition(ctx, "SCP", 0, 10); err != nil || exact {
		t.Fatalf("PeerPosition past copies not mirrored: exact %v, %v; want pending", exact, err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(mctx) }()
	defer func() { stop(); <-done }()
	testkit.WaitForState(t, 20*time.Second, "the position exact once mirrored", func() (bool, string) {
		d, exact, err := m.PeerPosition(ctx, "SCP", 0, 10)
		return err == nil && exact && d == 10, fmt.Sprintf("%d %v %v", d, exact, err)
	})

	// Transactions: copies 0..4, a commit marker at 5, copies 6..8, marker 9.
	tx := mustClient(t, local.ClientConfig(), kgo.TransactionalID("nf-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for range 2 {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			tx.Produce(ctx, &kgo.Record{Topic: "NRF", Value: []byte(fmt.Sprint(i))}, nil)
		}
		if err := tx.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitForState(t, 20*time.Second, "a position past a commit marker exact", func() (bool, string) {
		d, exact, err := m.PeerPosition(ctx, "NRF", 0, 12)
		return err == nil && exact && d == 10, fmt.Sprintf("%d %v %v", d, exact, err)
	})
}
