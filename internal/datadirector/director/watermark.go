package director

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Watermarks. The correlating stage of a re-keyed xdr feed must not time
// a transaction out, nor end its linger, while copies of it may still be on
// their way through the re-key stage: held up on a node that died (until
// the group's session timeout gives its partitions to another), in a
// partition moving in a rebalance, or behind a backlog. Only the re-key
// stage knows how far it has forwarded each source partition, so every
// node's re-key stage tells it, every watermarkInterval, in a marker record
// in each partition of the re-key topic: for each source partition it holds,
// the time up to which everything produced there has been forwarded (when
// it has forwarded all there was at its last look, that look's time; else
// the timestamp of the last copy it forwarded). The correlating stage keeps,
// per re-key partition it reads, the latest of each source partition's
// marks, and its correlator's clock is the lowest of them: it stands still
// while a source partition is not forwarded, and follows the new owner's
// progress through the backlog when one takes it over. A source partition
// whose mark has not moved for two session timeouts and a transaction
// timeout no longer holds the clock (its stage is gone).

// watermarkHeader marks a re-key topic record that is a watermark, not a
// copy.
const watermarkHeader = "signalbox-watermark"

// watermarkInterval is how often a re-key stage sends its watermarks.
const watermarkInterval = 200 * time.Millisecond

// sendWatermarks sends the re-key stage f's watermarks until ctx ends.
func (f *feed) sendWatermarks(ctx context.Context) {
	cl, err := f.m.cfg.Client.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(5*watermarkInterval))
	if err != nil {
		f.log.Error("xdr re-key stage: watermark producer", "err", err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(watermarkInterval)
	defer tick.Stop()
	var parts int32
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		lctx, cancel := context.WithTimeout(ctx, watermarkInterval)
		if parts == 0 {
			if ends, err := f.m.adm.ListEndOffsets(lctx, f.spec.Topic); err == nil {
				ends.Each(func(o kadm.ListedOffset) { parts = max(parts, o.Partition+1) })
			}
		}
		looked := time.Now().UnixNano()
		ends, err := f.m.adm.ListEndOffsets(lctx, f.spec.Sources...)
		if err != nil || parts == 0 {
			cancel()
			continue
		}
		buf = buf[:0]
		for k, p := range f.led.progress() {
			at := p.at
			if e, ok := ends.Lookup(k.topic, k.partition); ok && e.Err == nil && p.next >= e.Offset {
				at = looked // all there was is forwarded
			}
			if at <= 0 {
				continue
			}
			buf = appendWatermark(buf, k, at, p.next)
		}
		if len(buf) > 0 {
			recs := make([]*kgo.Record, parts)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: f.spec.Topic, Partition: int32(i), Value: buf,
					Headers: []kgo.RecordHeader{{Key: watermarkHeader, Value: []byte("1")}}}
			}
			_ = cl.ProduceSync(lctx, recs...).FirstErr() // the next tick sends newer marks
		}
		cancel()
	}
}

// appendWatermark appends "topic/partition=ns@next\n": k is forwarded up
// to time at, and every copy before offset next is.
func appendWatermark(buf []byte, k tp, at, next int64) []byte {
	buf = append(buf, k.topic...)
	buf = append(buf, '/')
	buf = strconv.AppendInt(buf, int64(k.partition), 10)
	buf = append(buf, '=')
	buf = strconv.AppendInt(buf, at, 10)
	buf = append(buf, '@')
	buf = strconv.AppendInt(buf, next, 10)
	return append(buf, '\n')
}

// originHeader names, on a re-key topic record, the source partition and
// offset its copy was read at: "topic/partition/offset".
const originHeader = "signalbox-origin"

// originWriter is a sink that takes headers for each copy's record (the
// kafka sink).
type originWriter interface {
	WriteWithHeaders(ctx context.Context, batch []*nfcopy.Copy, hdrs [][]kgo.RecordHeader) (uint64, error)
}

// originHeaders are the origin headers of b's copies.
func originHeaders(b *pollBatch) [][]kgo.RecordHeader {
	hdrs := make([][]kgo.RecordHeader, len(b.batch))
	for i := range b.batch {
		from := b.srcs[i]
		v := append([]byte(from.k.topic), '/')
		v = strconv.AppendInt(v, int64(from.k.partition), 10)
		v = append(v, '/')
		v = strconv.AppendInt(v, from.off, 10)
		hdrs[i] = []kgo.RecordHeader{{Key: originHeader, Value: v}}
	}
	return hdrs
}

// skip notes r if it is a watermark (read from re-key partition k), and
// reports whether it is one, or a copy forwarded again: read at a source
// offset a watermark read before it in k says was forwarded already (a
// re-key stage that took the partition over re-reads from its last
// commit). The first forwarding is in k before that watermark.
func (w *watermarks) skip(k tp, r *kgo.Record) bool {
	var origin []byte
	for _, h := range r.Headers {
		switch h.Key {
		case watermarkHeader:
			w.note(k, r)
			return true
		case originHeader:
			origin = h.Value
		}
	}
	if origin == nil {
		return false
	}
	s1 := bytes.IndexByte(origin, '/')
	s2 := bytes.LastIndexByte(origin, '/')
	if s1 <= 0 || s2 <= s1 {
		return false
	}
	p, err1 := strconv.ParseInt(string(origin[s1+1:s2]), 10, 32)
	off, err2 := strconv.ParseInt(string(origin[s2+1:]), 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	w.mu.Lock()
	mk, ok := w.by[k][tp{string(origin[:s1]), int32(p)}]
	w.mu.Unlock()
	if ok && off < mk.next {
		w.replayed.Inc()
		return true
	}
	return false
}

// watermarks are what a correlating stage was told, per re-key partition it
// reads and source partition: the lowest is its correlator's clock.
type watermarks struct {
	maxAge time.Duration // a mark not moving for longer no longer counts

	mu       sync.Mutex
	by       map[tp]map[tp]mark // re-key partition → source partition → its mark
	low      atomic.Int64       // the lowest mark that counts (ns); MaxInt64: none
	replayed prometheus.Counter // copies dropped as forwarded again
}

type mark struct {
	at    int64     // forwarded up to (ns)
	next  int64     // every copy before this offset forwarded
	moved time.Time // when it last moved
}

func newWatermarks(maxAge time.Duration, replayed prometheus.Counter) *watermarks {
	w := &watermarks{maxAge: maxAge, by: map[tp]map[tp]mark{}, replayed: replayed}
	w.low.Store(math.MaxInt64)
	return w
}

// note takes the marks of watermark record r, read from re-key partition k.
func (w *watermarks) note(k tp, r *kgo.Record) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.by[k]
	if m == nil {
		m = map[tp]mark{}
		w.by[k] = m
	}
	for line := range bytes.SplitSeq(r.Value, []byte{'\n'}) {
		slash, eq, atSign := bytes.LastIndexByte(line, '/'), bytes.LastIndexByte(line, '='), bytes.LastIndexByte(line, '@')
		if slash <= 0 || eq <= slash || atSign <= eq {
			continue
		}
		p, err1 := strconv.ParseInt(string(line[slash+1:eq]), 10, 32)
		at, err2 := strconv.ParseInt(string(line[eq+1:atSign]), 10, 64)
		next, err3 := strconv.ParseInt(string(line[atSign+1:]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		src := tp{string(line[:slash]), int32(p)}
		cur, ok := m[src]
		if !ok || at > cur.at {
			cur.at, cur.moved = at, now
		}
		cur.next = max(cur.next, next)
		m[src] = cur
	}
	w.update(now)
}

// forget drops the marks of re-key partitions the stage gave up.
func (w *watermarks) forget(parts map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	eachPart(parts, func(k tp) { delete(w.by, k) })
	w.update(time.Now())
}

// refresh lets marks that stopped moving age out of the lowest.
func (w *watermarks) refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.update(time.Now())
}

// update recomputes the lowest mark that counts; w.mu is held.
func (w *watermarks) update(now time.Time) {
	low := int64(math.MaxInt64)
	for _, m := range w.by {
		for _, mk := range m {
			if now.Sub(mk.moved) <= w.maxAge && mk.at < low {
				low = mk.at
			}
		}
	}
	w.low.Store(low)
}

// clamp is t, or the lowest mark if that is earlier.
func (w *watermarks) clamp(t time.Time) time.Time {
	if low := w.low.Load(); low < t.UnixNano() {
		return time.Unix(0, low)
	}
	return t
}
