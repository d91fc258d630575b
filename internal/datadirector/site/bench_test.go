package site

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// BenchmarkMirror: copies of 3000 bytes, already in this site's Kafka, are
// mirrored into the peer's. Both brokers run in this process, so the CPU
// per copy counts the mirror and both brokers' share of the work.
func BenchmarkMirror(b *testing.B) {
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 12}}
	local := kafkatest.StartBroker(b, broker.Config{Topics: topics})
	// The mirrored topic exists, as it does at a peer that runs -site.
	remote := kafkatest.StartBroker(b, broker.Config{Topics: []broker.TopicSpec{{Name: "east.SCP", Partitions: 12}}})
	cl := mustClient(b, local.ClientConfig(), kgo.ProducerLinger(5*time.Millisecond))
	value := make([]byte, 3000)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "SCP", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(mustClient(b, remote.ClientConfig()))
	b.ResetTimer()
	cpu := testkit.CPUTime()
	m := NewMirror(MirrorConfig{Site: "east", Peer: "west", Local: local.ClientConfig(), Remote: remote.ClientConfig(), Topics: topics, Logger: testkit.Logger()})
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(mctx) }()
	for {
		ends, err := adm.ListEndOffsets(ctx, "east.SCP")
		var n int64
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		}
		if n >= int64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	testkit.ReportCPU(b, cpu)
	if err := m.LastError(); err != nil {
		b.Logf("the mirror failed on the way: %v", err)
	}
	cancel()
	<-done
}
