package director

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/copy"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sharedHarness is a Manager with no broker behind it (its admin client is
// lazy) and feeds whose decode is driven with hand-built polls.
func sharedHarness(t *testing.T, feeds ...string) (*Manager, []*feed) {
	t.Helper()
	m, err := NewManager(Config{Client: broker.ClientConfig{Brokers: []string{"127.0.0.1:1"}}, Topics: testTopics[:3]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.admin.Close)
	var fs []*feed
	for _, name := range feeds {
		f := m.newFeed(FeedSpec{Name: name, Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}})
		t.Cleanup(f.share())
		fs = append(fs, f)
	}
	return m, fs
}

// poll builds one poll of SCP partition 0 holding values at offsets from..
func poll(from int64, values ...[]byte) kgo.Fetches {
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: "SCP", Partition: 0, Offset: from + int64(i), Value: v})
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "SCP", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
}

// decoded is what a plain copy.Decode gives for v, owned.
func decoded(t *testing.T, v []byte) *copy.Copy {
	t.Helper()
	var c copy.Copy
	if err := copy.Decode(v, &c); err != nil {
		t.Fatal(err)
	}
	return c.Clone()
}

func sameCopy(t *testing.T, what string, got, want *copy.Copy) {
	t.Helper()
	g, w := *got, *want
	if g.CorrelationID != w.CorrelationID || string(g.Body) != string(w.Body) || string(g.Raw) != string(w.Raw) ||
		!reflect.DeepEqual(g.Headers, w.Headers) || g.Timestamp != w.Timestamp || g.Direction != w.Direction {
		t.Errorf("%s: got %+v, want %+v", what, g, w)
	}
}

func TestSharedDecodeServesOtherFeeds(t *testing.T) {
	m, fs := sharedHarness(t, "a", "b", "c")
	ctx := context.Background()
	vals := [][]byte{
		record("s-0", "SCP", copy.RequestIngress),
		[]byte(`{"version":"1.0.0","metadata-list":{`), // undecodable
		record("s-2", "SCP", copy.ResponseEgress),
	}
	var batches [3]*pollBatch
	for i, f := range fs {
		batches[i] = &pollBatch{}
		if !f.decode(ctx, poll(0, vals...), batches[i]) {
			t.Fatalf("feed %s: empty poll", f.spec.Name)
		}
	}
	// a decoded both good copies itself and left clones; b and c took them.
	if got := testutil.ToFloat64(m.m.sharedClones); got != 2 {
		t.Errorf("clones = %g, want 2", got)
	}
	if got := testutil.ToFloat64(m.m.sharedHits); got != 4 {
		t.Errorf("hits = %g, want 4 (two feeds x two copies)", got)
	}
	for i, b := range batches {
		name := fs[i].spec.Name
		if len(b.batch) != 2 || len(b.dlq) != 1 || len(b.marks) != 1 {
			t.Fatalf("feed %s: batch %d, dlq %d, marks %d; want 2, 1, 1", name, len(b.batch), len(b.dlq), len(b.marks))
		}
		sameCopy(t, name+" copy 0", b.batch[0], decoded(t, vals[0]))
		sameCopy(t, name+" copy 1", b.batch[1], decoded(t, vals[2]))
		if fs[i].invalid.Load() != 1 {
			t.Errorf("feed %s counted %d invalid, want 1 (each feed dead-letters what it cannot decode)", name, fs[i].invalid.Load())
		}
	}
	if batches[1].batch[0] != batches[2].batch[0] || batches[0].batch[0] == batches[1].batch[0] {
		t.Error("b and c should share one clone; a keeps its own arena copy")
	}
	// Everyone took the entries: the ring holds nothing more.
	sp := m.shared["SCP"].part(0)
	for i := range sp.slots {
		if sp.slots[i].sc != nil {
			t.Fatalf("slot %d still holds offset %d after every feed took it", i, sp.slots[i].off)
		}
	}
	// The arena copy a released batch unpins is a's own, never a clone.
	batches[0].release()
	sameCopy(t, "b's copy after a released its batch", batches[1].batch[0], decoded(t, vals[0]))
	// Once b and c delivered theirs, nothing refers to the shared copies.
	scs := append([]*sharedCopy(nil), batches[1].shared...)
	if len(scs) != 2 {
		t.Fatalf("b holds %d shared copies, want 2", len(scs))
	}
	batches[1].release()
	if r := scs[0].refs.Load(); r != 1 {
		t.Errorf("after b's release: %d references, want 1 (c's)", r)
	}
	batches[2].release()
	for _, sc := range scs {
		if r := sc.refs.Load(); r != 0 {
			t.Errorf("after every release: %d references, want 0", r)
		}
	}
}

func TestSharedDecodeChecksTheBytes(t *testing.T) {
	m, fs := sharedHarness(t, "a", "b")
	ctx := context.Background()
	first := record("old-0", "SCP", copy.RequestIngress)
	if !fs[0].decode(ctx, poll(7, first), &pollBatch{}) {
		t.Fatal("empty poll")
	}
	// The same offset with other bytes (the topic was recreated): b must
	// decode what it has, not take a's clone.
	again := record("new-0", "SCP", copy.RequestIngress)
	b := &pollBatch{}
	fs[1].decode(ctx, poll(7, again), b)
	if len(b.batch) != 1 {
		t.Fatalf("batch of %d", len(b.batch))
	}
	sameCopy(t, "recreated offset", b.batch[0], decoded(t, again))
	if got := testutil.ToFloat64(m.m.sharedHits); got != 0 {
		t.Errorf("hits = %g, want 0", got)
	}
}

func TestSharedDecodeOffWithOneFeed(t *testing.T) {
	m, fs := sharedHarness(t, "solo")
	b := &pollBatch{}
	fs[0].decode(context.Background(), poll(0, record("x", "SCP", copy.RequestIngress)), b)
	if len(b.batch) != 1 || testutil.ToFloat64(m.m.sharedClones) != 0 {
		t.Errorf("batch %d, clones %g: a lone feed should decode without cloning", len(b.batch), testutil.ToFloat64(m.m.sharedClones))
	}
}

// Feeds decoding the same partitions at once (go test -race) each get every
// copy right, whoever decoded it.
func TestSharedDecodeConcurrent(t *testing.T) {
	_, fs := sharedHarness(t, "a", "b", "c", "d")
	const polls, per = 40, 50
	vals := make([][]byte, polls*per)
	for i := range vals {
		vals[i] = record(fmt.Sprintf("c-%d", i), "SCP", copy.RequestIngress)
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(fs))
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &pollBatch{}
			for p := range polls {
				f.decode(context.Background(), poll(int64(p*per), vals[p*per:(p+1)*per]...), b)
				for i, c := range b.batch {
					if want := fmt.Sprintf("c-%d", p*per+i); c.CorrelationID != want {
						errs <- fmt.Sprintf("feed %s: copy %d is %s, want %s", f.spec.Name, p*per+i, c.CorrelationID, want)
						return
					}
				}
				b.release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A feed in front whose copies no one takes (the others are more than a
// ring behind, or stopped) clones only every other round of the ring.
func TestSharedDecodeStopsCloningForNoOne(t *testing.T) {
	m, fs := sharedHarness(t, "front", "stopped")
	vals := make([][]byte, 3*sharedSlots)
	for i := range vals {
		vals[i] = record(fmt.Sprintf("f-%d", i), "SCP", copy.RequestIngress)
	}
	b := &pollBatch{}
	for i := 0; i < len(vals); i += 64 {
		fs[0].decode(context.Background(), poll(int64(i), vals[i:i+64]...), b)
		b.release()
	}
	if got := testutil.ToFloat64(m.m.sharedClones); got != 2*sharedSlots {
		t.Errorf("clones = %g, want %d (rounds one and three of three)", got, 2*sharedSlots)
	}
}
