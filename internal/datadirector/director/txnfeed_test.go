package director

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// An exactly-once kafka feed whose target topic refuses one copy as too
// large: the transaction with it aborts, the poll is read again, and the
// copy goes to the dead letters while the others go out, each once.
func TestExactlyOnceRecordTooLarge(t *testing.T) {
	c := startCluster(t, kfakeCluster, 1)
	h := newHarness(t, c, func(cfg *Config) { cfg.CreateTopics = true })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	small := broker.TopicSpec{Name: "copies.small", Partitions: 1, Configs: map[string]string{"max.message.bytes": "3800"}}
	if err := broker.EnsureTopics(ctx, h.m.admin, []broker.TopicSpec{small}, true); err != nil {
		t.Fatal(err)
	}
	h.apply(FeedSpec{Name: "big", Type: TypeKafka, Sources: []string{"NRF"}, Topic: small.Name, ExactlyOnce: true})
	testkit.WaitFor(t, 20*time.Second, "the feed to read", func() bool { return h.status("big").State == StateConnected })
	pcl := producer(t, c)
	var recs []*kgo.Record
	for i := range 21 {
		req := fixture.Record(fmt.Sprintf("big-%d", i), "NRF", nfcopy.RequestIngress)
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
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out := newOutputReader(t, c, small.Name)
	dlq := newOutputReader(t, c, broker.DLQTopic)
	testkit.WaitForState(t, 30*time.Second, "20 copies out, one dead-lettered", func() (bool, string) {
		u, d := out.counts("big-")
		l, _ := dlq.counts("big-10")
		return u == 20 && l == 1, fmt.Sprintf("%d out (%d twice), %d dead-lettered", u, d, l)
	})
	if u, d := out.counts("big-"); u != 20 || d != 0 {
		t.Errorf("%d copies out, %d twice", u, d)
	}
	if u, _ := out.counts("big-10"); u != 0 {
		t.Error("the copy too large came out")
	}
	if st := h.status("big"); st.Undeliverable != 1 {
		t.Errorf("undeliverable %d, want 1", st.Undeliverable)
	}
}
