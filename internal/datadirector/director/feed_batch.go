package director

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// pipelineDepth is how many polled batches a feed holds at once: one being
// decoded and the others written or waiting to be (with a PipelinedSink, one
// of them may be written and awaiting confirmation).
const pipelineDepth = 3

// pollBatch is one poll's copies on their way to the sink. Its copies point
// into the poll's record values, which the client does not reuse.
type pollBatch struct {
	arena       []*nfcopy.Copy // decoded copies, reused across polls
	used        int            // arena entries decoded by this poll
	batch       []*nfcopy.Copy // those that passed direction and filter
	held        []*nfcopy.Copy // decoded, not in batch yet: feed.pass held them
	marks       []*kgo.Record  // the last record of each partition
	epochs      []uint64       // the ledger epoch each mark was handed in
	srcs        []copyFrom     // xdr feeds: where each copy in batch was read
	dlq         []*kgo.Record
	redelivered uint64
	recycle     bool          // the client pools decompressed batches: recycle recs on release
	recs        []*kgo.Record // every record of the poll, when recycle

	cl     *kgo.Client  // the feed's own reader that polled it, which commits its marks; or
	mem    *tapMember   // the tap membership that handed it, which commits them, and
	shared *sharedBatch // the tap's batch its copies point into
}

// copyFrom is the partition and offset a copy was read at.
type copyFrom struct {
	k   tp
	off int64
}

// reset empties b for a new poll.
func (b *pollBatch) reset() {
	b.batch, b.marks, b.epochs, b.dlq, b.redelivered = b.batch[:0], b.marks[:0], b.epochs[:0], b.dlq[:0], 0
	b.srcs = b.srcs[:0]
	clear(b.held)
	b.held = b.held[:0]
}

// mark notes r as its partition's last record in b, handed in epoch.
func (b *pollBatch) mark(r *kgo.Record, epoch uint64) {
	b.marks = append(b.marks, r)
	b.epochs = append(b.epochs, epoch)
}

// decode fills b from one poll; false when the poll held no records. The
// records of a partition the feed does not hold (revoked since the fetch)
// are left to its new owner.
func (f *feed) decode(ctx context.Context, fs kgo.Fetches, b *pollBatch) bool {
	b.reset()
	n := 0
	var wm *watermarks // a correlating stage's, which reads watermarks among the copies
	if xs := f.xdrStage(); xs != nil {
		wm = xs.wm
	}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if b.recycle {
			b.recs = append(b.recs, p.Records...)
		}
		if len(p.Records) == 0 {
			return
		}
		k := tp{p.Topic, p.Partition}
		first, last := p.Records[0], p.Records[len(p.Records)-1]
		h := f.led.hand(k, first.Offset, last.Offset+1)
		if !h.owned {
			return
		}
		f.checkGap(ctx, k, h, first.Offset)
		recs := p.Records
		if h.expected > first.Offset {
			// Handed already: a poll fetched before the reader moved to
			// where the ledger starts the partition (feed.assigned).
			i, _ := slices.BinarySearchFunc(recs, h.expected, func(r *kgo.Record, o int64) int { return cmp.Compare(r.Offset, o) })
			if recs = recs[i:]; len(recs) == 0 {
				return
			}
		}
		for _, r := range recs {
			if wm != nil && wm.skip(k, r) {
				continue
			}
			if n == len(b.arena) {
				b.arena = append(b.arena, new(nfcopy.Copy))
			}
			c := b.arena[n]
			b.used = max(b.used, n+1)
			if f.calls {
				if f.admitCall(b, r, c, r.Offset <= h.high) {
					n++
				}
				continue
			}
			if f.admit(b, r, c, nfcopy.Decode(r.Value, c), r.Offset <= h.high) {
				n++ // c is in the batch: the next record takes a fresh copy
			}
		}
		b.mark(last, h.epoch)
	})
	f.followHeld(b)
	f.sequence(b)
	return len(b.marks) > 0
}

// sequence applies the feed's Sequencing to a decoded batch.
func (f *feed) sequence(b *pollBatch) {
	if f.seq == nil || len(b.batch) < 2 {
		return
	}
	if n := f.seq.sequence(b.batch); n > 0 {
		f.reordered.Add(uint64(n))
		f.m.m.reordered.WithLabelValues(f.spec.Name).Add(float64(n))
	}
}

// admitCall adds the call record r to b, as a copy c that carries it as
// it is (Raw), keyed by the calling number, if it is a call record and
// passes the feed's filter; anything else goes to b's dead letters.
func (f *feed) admitCall(b *pollBatch, r *kgo.Record, c *nfcopy.Copy, redelivered bool) bool {
	if redelivered {
		b.redelivered++
	}
	if err := callrecord.Decode(r.Value, &f.callRec); err != nil {
		b.dlq = f.deadLetter(b.dlq, r, err)
		return false
	}
	if !f.passCall(&f.callRec) {
		return false
	}
	*c = nfcopy.Copy{Raw: r.Value, Timestamp: f.callRec.Time.UnixNano(), CorrelationID: f.callRec.Calling}
	b.batch = append(b.batch, c)
	return true
}

// admit adds the copy c decoded from r to b if it decoded (decodeErr nil)
// and the feed takes it (its directions and filter); an undecodable record
// goes to b's dead letters. redelivered: r was delivered before.
func (f *feed) admit(b *pollBatch, r *kgo.Record, c *nfcopy.Copy, decodeErr error, redelivered bool) bool {
	if redelivered {
		b.redelivered++
	}
	if decodeErr != nil {
		var de *nfcopy.DecodeError
		if !errors.As(decodeErr, &de) || !de.Incomplete {
			b.dlq = f.deadLetter(b.dlq, r, decodeErr) // not a copy at all
			return false
		}
		// A copy that lacks what packets and records are made of: relayed
		// by the feeds that carry records as they are, skipped by the rest.
		if !f.relaysRaw() {
			f.m.m.incomplete.WithLabelValues(f.spec.Name, de.Reason, "skipped").Inc()
			f.incomplete.Add(1)
			return false
		}
		f.m.m.incomplete.WithLabelValues(f.spec.Name, de.Reason, "relayed").Inc()
	}
	if !f.dirs[c.Direction] {
		return false
	}
	ok, held := f.pass(c)
	if held {
		b.held = append(b.held, c) // its arena slot is kept: the next record takes a fresh copy
		return true
	}
	if !ok {
		return false
	}
	b.batch = append(b.batch, c)
	if f.spec.Type == TypeXDR || f.spec.stage == stageRekey {
		b.srcs = append(b.srcs, copyFrom{tp{r.Topic, r.Partition}, r.Offset})
	}
	return true
}

// release drops b's references into the records it was decoded from, once
// they are delivered: a decoded string pins the whole decompressed producer
// batch it points into (~150 KB), and four lagging feeds' idle arenas held
// ~1 GB that way. The copies keep their reusable buffers.
func (b *pollBatch) release() {
	if b.shared != nil {
		clear(b.batch)
		clear(b.marks)
		clear(b.dlq)
		b.epochs = b.epochs[:0]
		b.shared.unref()
		b.shared, b.mem = nil, nil
		return
	}
	b.mem = nil // a detached member's own read (tapMember.catchUp)
	clear(b.marks)
	clear(b.dlq)
	releaseDecoded(b.arena[:b.used], func(yield func([]*kgo.Record)) { yield(b.recs) })
	b.used = 0
	clear(b.recs)
	b.recs = b.recs[:0]
}

// releaseDecoded unpins copies, then recycles the records they were decoded
// from (each set eachRecords yields) into franz-go's pools: in that order,
// so that no copy points into a recycled record. The caller has dropped
// every other reference into the records.
func releaseDecoded(copies []*nfcopy.Copy, eachRecords func(yield func([]*kgo.Record))) {
	for _, c := range copies {
		unpin(c)
	}
	eachRecords(func(recs []*kgo.Record) {
		for _, r := range recs {
			r.Recycle()
		}
	})
}

// unpin clears the fields of c that alias the record it was decoded from
// (nfcopy.Decode: strings and header values alias the raw record; Body is
// copied), keeping the capacity of Headers, their Values and Body.
func unpin(c *nfcopy.Copy) {
	for i, h := range c.Headers[:cap(c.Headers)] {
		clear(h.Values[:cap(h.Values)])
		c.Headers[:cap(c.Headers)][i].Name = ""
	}
	c.Version, c.CorrelationID, c.ProducerID, c.ProducerFQDN = "", "", "", ""
	c.ConsumerID, c.ConsumerFQDN, c.HopByHopID, c.NFType = "", "", "", ""
	c.NFFQDN, c.NFInstanceID, c.PodInstanceID, c.SourceIP, c.DestIP = "", "", "", "", ""
	c.Raw = nil
}

// deadLetter queues an undecodable record for the DLQ, once per node however
// many feeds meet it (invalidOnce); the feed then skips it.
func (f *feed) deadLetter(dlq []*kgo.Record, r *kgo.Record, err error) []*kgo.Record {
	reason := "invalid"
	var de *nfcopy.DecodeError
	if errors.As(err, &de) {
		reason = de.Reason
	}
	f.invalid.Add(1)
	if !f.m.invalidSeen.first(recordAt{tp{r.Topic, r.Partition}, r.Offset}) {
		return dlq
	}
	f.m.m.invalid.WithLabelValues(r.Topic, reason).Inc()
	return append(dlq, &kgo.Record{
		Topic: f.m.cfg.DLQTopic,
		Key:   r.Key,
		Value: r.Value,
		Headers: []kgo.RecordHeader{
			{Key: "signalbox-error", Value: []byte(err.Error())},
			{Key: "signalbox-reason", Value: []byte(reason)},
			{Key: "signalbox-source-topic", Value: []byte(r.Topic)},
			{Key: "signalbox-source-partition", Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
			{Key: "signalbox-source-offset", Value: strconv.AppendInt(nil, r.Offset, 10)},
			{Key: "signalbox-feed", Value: []byte(f.spec.Name)},
		},
	})
}

// undeliverable queues a copy the sink can never deliver for the DLQ, with
// the sink's reason; the feed moves on past it.
func (f *feed) undeliverable(dlq []*kgo.Record, c *nfcopy.Copy, reason string) []*kgo.Record {
	f.undelivered.Add(1)
	f.m.m.undeliverable.WithLabelValues(f.spec.Name).Inc()
	f.log.Warn("feed: copy the sink can never deliver sent to the dead-letter topic",
		"correlation_id", c.CorrelationID, "bytes", len(c.Raw), "reason", reason)
	return append(dlq, &kgo.Record{
		Topic: f.m.cfg.DLQTopic,
		Key:   []byte(c.CorrelationID),
		Value: c.Raw,
		Headers: []kgo.RecordHeader{
			{Key: "signalbox-error", Value: []byte(reason)},
			{Key: "signalbox-reason", Value: []byte("undeliverable")},
			{Key: "signalbox-source-topic", Value: []byte(c.NFType)},
			{Key: "signalbox-feed", Value: []byte(f.spec.Name)},
		},
	})
}

// maxDeadLetter bounds a dead letter's value: a record too large for a sink
// is often too large for the dead-letter topic too (the producer refuses a
// record over its batch limit, about 1 MB), so what is over is cut, and the
// headers say how large it was.
const maxDeadLetter = 900 << 10

// truncateDeadLetter cuts r's value to maxDeadLetter, saying so in its
// headers.
func truncateDeadLetter(r *kgo.Record) {
	if len(r.Value) > maxDeadLetter {
		r.Headers = append(r.Headers,
			kgo.RecordHeader{Key: "signalbox-truncated", Value: []byte("true")},
			kgo.RecordHeader{Key: "signalbox-original-bytes", Value: strconv.AppendInt(nil, int64(len(r.Value)), 10)})
		r.Value = r.Value[:maxDeadLetter]
	}
}

func (f *feed) flushDLQ(ctx context.Context, dlq []*kgo.Record) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, r := range dlq {
		truncateDeadLetter(r)
	}
	if err := f.m.admin.ProduceSync(ctx, dlq...).FirstErr(); err != nil {
		// The record is still skipped: a broken DLQ must not stop the feed.
		f.log.Error("feed: dead-letter produce failed; invalid copies skipped", "count", len(dlq), "err", err)
	}
}

// relaysRaw reports whether the feed delivers records as they are (HTTP/2
// JSON, Kafka, JSON-lines files), so that a copy synthetic packets and xDRs
// cannot be made of still goes out.
func (f *feed) relaysRaw() bool {
	switch f.spec.Type {
	case TypeHTTP2, TypeKafka:
		return true
	case TypeFile:
		return f.spec.File != nil && f.spec.File.Format == "jsonl"
	}
	return false
}
