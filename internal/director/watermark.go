package director

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
			buf = appendWatermark(buf, k, at)
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

// appendWatermark appends "topic/partition=ns\n".
func appendWatermark(buf []byte, k tp, at int64) []byte {
	buf = append(buf, k.topic...)
	buf = append(buf, '/')
	buf = strconv.AppendInt(buf, int64(k.partition), 10)
	buf = append(buf, '=')
	buf = strconv.AppendInt(buf, at, 10)
	return append(buf, '\n')
}

// isWatermark reports whether r is a re-key stage's watermark record.
func isWatermark(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == watermarkHeader {
			return true
		}
	}
	return false
}

// watermarks are what a correlating stage was told, per re-key partition it
// reads and source partition: the lowest is its correlator's clock.
type watermarks struct {
	maxAge time.Duration // a mark not moving for longer no longer counts

	mu  sync.Mutex
	by  map[tp]map[tp]mark // re-key partition → source partition → its mark
	low atomic.Int64       // the lowest mark that counts (ns); MaxInt64: none
}

type mark struct {
	at    int64     // forwarded up to (ns)
	moved time.Time // when it last moved
}

func newWatermarks(maxAge time.Duration) *watermarks {
	w := &watermarks{maxAge: maxAge, by: map[tp]map[tp]mark{}}
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
		slash, eq := bytes.LastIndexByte(line, '/'), bytes.LastIndexByte(line, '=')
		if slash <= 0 || eq <= slash {
			continue
		}
		p, err1 := strconv.ParseInt(string(line[slash+1:eq]), 10, 32)
		at, err2 := strconv.ParseInt(string(line[eq+1:]), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		src := tp{string(line[:slash]), int32(p)}
		if cur, ok := m[src]; !ok || at > cur.at {
			m[src] = mark{at, now}
		}
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
