package site

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// TestMirror: a site's copies reach the peer's Kafka partition for
// partition, with key, value, headers and timestamp, and their origin; a
// mirror started again goes on after the last copy the peer holds (none
// twice, none lost); an old position is translated by reading the peer's
// copy; and a peer topic of another partition count is refused by name.
func TestMirror(t *testing.T) {
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 2}}
	local := kafkatest.StartBroker(t, broker.Config{Topics: topics})
	remote := kafkatest.StartBroker(t, broker.Config{Topics: []broker.TopicSpec{{Name: "east.NRF", Partitions: 3}}})
	cfg := MirrorConfig{Site: "east", Peer: "west", Local: local.ClientConfig(), Remote: remote.ClientConfig(),
		Topics: topics, Registerer: prometheus.NewRegistry(), Logger: testkit.Logger()}

	produce := func(from, to int) {
		cl, err := local.ClientConfig().NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: "SCP", Partition: int32(i % 2), Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("copy ", i)),
				Headers: []kgo.RecordHeader{{Key: "x-n", Value: []byte(fmt.Sprint(i))}}, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func() (*Mirror, context.CancelFunc, chan struct{}) {
		c := cfg
		c.Registerer = prometheus.NewRegistry()
		m := NewMirror(c)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		return m, cancel, done
	}
	mirrored := func(want int64) {
		adm := kadm.NewClient(mustClient(t, remote.ClientConfig()))
		testkit.WaitForState(t, 30*time.Second, "copies mirrored", func() (bool, string) {
			ends, err := adm.ListEndOffsets(context.Background(), "east.SCP")
			if err != nil {
				return false, err.Error()
			}
			var n int64
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
			return n >= want, fmt.Sprintf("%d of %d", n, want)
		})
	}

	produce(0, 1000)
	m, stop, done := run()
	mirrored(1000)
	stop()
	<-done
	produce(1000, 1500)
	m2, stop2, done2 := run()
	defer func() { stop2(); <-done2 }()
	mirrored(1500)
	// The running mirror's map learns a copy when the peer acknowledges it,
	// which may be after a reader sees it there; until then it answers the
	// position after the last copy it knows (no copy skipped). Both
	// partitions' last copies known: 750 each.
	testkit.WaitForState(t, 10*time.Second, "the mirror's map to know every copy", func() (bool, string) {
		d0, _ := m2.PeerOffset(context.Background(), "SCP", 0, 750)
		d1, _ := m2.PeerOffset(context.Background(), "SCP", 1, 750)
		return d0 == 750 && d1 == 750, fmt.Sprintf("next of 750: %d and %d", d0, d1)
	})

	// Every copy once, on its partition, as it was.
	rd := mustClient(t, remote.ClientConfig(), kgo.ConsumeTopics("east.SCP"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < 1500 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var n string
			hs := map[string]string{}
			for _, h := range r.Headers {
				hs[h.Key] = string(h.Value)
			}
			n = hs["x-n"]
			if seen[n] {
				t.Errorf("copy %s mirrored twice", n)
			}
			seen[n] = true
			var i int
			fmt.Sscan(n, &i)
			origin, ok := originOffset(r)
			if string(r.Value) != "copy "+n || string(r.Key) != "k"+n || r.Partition != int32(i%2) || hs[HeaderSite] != "east" ||
				!ok || origin != int64(i/2) || r.Timestamp.UnixMilli() != 1_700_000_000_000+int64(i) {
				t.Errorf("mirrored copy %s: partition %d origin %d value %q headers %v ts %v", n, r.Partition, origin, r.Value, hs, r.Timestamp)
			}
			// The map of the running mirror knows the copies it made.
			if i >= 1000 {
				if d, ok := m2.PeerOffset(context.Background(), "SCP", r.Partition, origin); !ok || d != r.Offset {
					t.Errorf("PeerOffset(SCP/%d, %d) = %d, %v; the copy is at %d", r.Partition, origin, d, ok, r.Offset)
				}
			}
		})
	}
	if len(seen) != 1500 {
		t.Fatalf("%d distinct copies mirrored, want 1500", len(seen))
	}
	// Positions from before the restart: the map starts at the peer's last
	// copies, so the mirror reads the copy there.
	if o, ok := m2.LocalOffset(context.Background(), "SCP", 1, 10); !ok || o != 10 {
		t.Fatalf("LocalOffset(SCP/1, 10) = %d, %v; want 10", o, ok)
	}
	if o, ok := m2.LocalOffset(context.Background(), "SCP", 0, 750); !ok || o != 750 {
		t.Fatalf("LocalOffset at the end = %d, %v; want 750", o, ok)
	}
	// And the other way, by searching the peer's topic: a mirror that
	// never ran knows nothing of the copies.
	fresh := NewMirror(MirrorConfig{Site: "east", Peer: "west", Local: cfg.Local, Remote: cfg.Remote, Topics: topics, Logger: testkit.Logger()})
	for _, c := range [][2]int64{{0, 0}, {37, 37}, {749, 749}, {750, 750}, {900, 750}} {
		if d, ok := fresh.PeerOffset(context.Background(), "SCP", 1, c[0]); !ok || d != c[1] {
			t.Errorf("PeerOffset(SCP/1, %d) by search = %d, %v; want %d", c[0], d, ok, c[1])
		}
	}
	_ = m

	// A mirrored topic of another partition count is refused.
	c := cfg
	c.Topics = []broker.TopicSpec{{Name: "NRF", Partitions: 2}}
	c.Registerer = prometheus.NewRegistry()
	bad := NewMirror(c)
	bctx, bcancel := context.WithCancel(context.Background())
	bdone := make(chan struct{})
	go func() { defer close(bdone); bad.Run(bctx) }()
	testkit.WaitFor(t, 20*time.Second, "the partition count refused", func() bool {
		err := bad.LastError()
		return err != nil && strings.Contains(err.Error(), "east.NRF has 3 partitions, this site's 2")
	})
	bcancel()
	<-bdone
}

func mustClient(t testing.TB, cc broker.ClientConfig, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := cc.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
