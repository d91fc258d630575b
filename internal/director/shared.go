package director

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/signalbox/signalbox/internal/copy"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Feeds that read the same topic share its decoding: every feed is its own
// consumer group (own offsets, own pace, own failures), but when several are
// in step, the one in front decodes each record and leaves an owned copy
// (copy.CloneTo into a pooled buffer, ~0.5 µs for 3 KB) for the others, who
// take it instead of decoding the record again (~2.5 µs). With four feeds at
// 30K MPS decoding was a third of serve's CPU.
//
// The cache holds, per partition, a ring of the last sharedSlots offsets the
// front feed decoded. An entry leaves the ring once every other feed reading
// the topic took it, or when a later offset needs its slot; a feed that falls
// more than a ring behind decodes for itself and leaves nothing. Only the
// feed in front clones, and only every other round of a slot whose last copy
// no one took, so feeds that drifted apart cost little more than unshared
// ones. A hit must match the record's bytes (a recreated topic
// restarts its offsets), so a shared copy is always the decoding of exactly
// the record in hand. Shared copies are reference counted: the ring holds
// one reference and each feed's batch one until it is delivered
// (pollBatch.release), and the last one returns the buffers to the pool.
//
// A partition's ring is locked while a feed decodes a run of its records:
// feeds polling the same partition at the same time take turns instead of
// decoding it twice. xdr feeds do not share: their correlator keeps copies
// past the batch.
type sharedTopic struct {
	feeds atomic.Int32 // running feeds sharing the topic

	mu    sync.Mutex
	parts map[int32]*sharedPart
}

// sharedSlots is the ring size per partition (a power of two). At the
// reference mix a partition carries 0.8-1.5K copies/s, so a ring spans
// ~0.2-0.3 s; an entry keeps ~6.5 KB (body and raw record).
const sharedSlots = 256

type sharedPart struct {
	mu    sync.Mutex
	head  int64 // the offset after the highest one decoded here
	slots [sharedSlots]sharedEntry
}

type sharedEntry struct {
	off   int64
	sc    *sharedCopy
	left  int32 // other feeds yet to take it
	taken bool  // by one at least
}

// sharedCopy is a decoded copy that owns its memory, shared read-only by
// the ring and the batches that took it.
type sharedCopy struct {
	c    copy.Copy
	refs atomic.Int32
}

var sharedCopies = sync.Pool{New: func() any { return new(sharedCopy) }}

func (sc *sharedCopy) unref() {
	if sc.refs.Add(-1) == 0 {
		sharedCopies.Put(sc)
	}
}

func newSharedTopics(names []string) map[string]*sharedTopic {
	m := make(map[string]*sharedTopic, len(names))
	for _, n := range names {
		m[n] = &sharedTopic{parts: map[int32]*sharedPart{}}
	}
	return m
}

func (t *sharedTopic) part(p int32) *sharedPart {
	t.mu.Lock()
	defer t.mu.Unlock()
	sp := t.parts[p]
	if sp == nil {
		sp = new(sharedPart)
		t.parts[p] = sp
	}
	return sp
}

// share registers f as a sharing reader of its source topics until the
// returned func is called.
func (f *feed) share() (unshare func()) {
	var ts []*sharedTopic
	for _, s := range f.spec.Sources {
		if t := f.m.shared[s]; t != nil {
			t.feeds.Add(1)
			ts = append(ts, t)
		}
	}
	f.sharing = ts != nil
	return func() {
		for _, t := range ts {
			t.feeds.Add(-1)
		}
	}
}

// decodeShared decodes one partition's records of a poll through the topic's
// shared cache, passing each to use with its copy (the feed's own from
// decode, or a shared one, which b keeps a reference to) or decode's error.
func (f *feed) decodeShared(t *sharedTopic, p *kgo.FetchTopicPartition, b *pollBatch,
	decode func(*kgo.Record) (*copy.Copy, error), use func(*kgo.Record, *copy.Copy, error)) {
	sp := t.part(p.Partition)
	var hits, clones int
	sp.mu.Lock()
	defer func() {
		sp.mu.Unlock()
		f.m.m.sharedHits.Add(float64(hits))
		f.m.m.sharedClones.Add(float64(clones))
	}()
	for _, r := range p.Records {
		e := &sp.slots[r.Offset&(sharedSlots-1)]
		if sc := e.sc; sc != nil && e.off == r.Offset && bytes.Equal(sc.c.Raw, r.Value) {
			sc.refs.Add(1)
			b.shared = append(b.shared, sc)
			e.taken = true
			if e.left--; e.left <= 0 {
				*e = sharedEntry{}
				sc.unref() // the ring's
			}
			hits++
			use(r, &sc.c, nil)
			continue
		}
		c, err := decode(r)
		if others := t.feeds.Load() - 1; err == nil && others > 0 && r.Offset >= sp.head {
			stale := e.sc != nil && !e.taken
			if e.sc != nil {
				e.sc.unref()
				*e = sharedEntry{}
			}
			// A ring ago no other feed took this slot's copy: they are
			// more than a ring behind (or stopped), and would not take
			// this one either. Every other round is enough to notice
			// when they catch up.
			if !stale {
				sc := sharedCopies.Get().(*sharedCopy)
				c.CloneTo(&sc.c)
				sc.refs.Store(1)
				*e = sharedEntry{off: r.Offset, sc: sc, left: others}
				clones++
			}
		}
		sp.head = max(sp.head, r.Offset+1)
		use(r, c, err)
	}
}
