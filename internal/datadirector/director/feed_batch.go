package director

import (
	"context"
	"errors"
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

// pollBatch is a feed's share of one poll on its way to the sink. Its copies
// are the decoded poll's (shared), and point into its records.
type pollBatch struct {
	batch       []*nfcopy.Copy // the poll's copies that passed direction and filter
	held        []*nfcopy.Copy // decoded, not in batch yet: feed.pass held them
	marks       []*kgo.Record  // the last record of each partition
	epochs      []uint64       // the ledger epoch each mark was handed in
	srcs        []copyFrom     // xdr feeds: where each copy in batch was read
	dlq         []*kgo.Record
	redelivered uint64

	mem    *tapMember   // the tap membership that handed it, which commits it (nil: the feed's own reader)
	shared *decodedPoll // the poll its copies point into (feed.take)
	seq    sequencer    // the feed's Sequencing, with this batch's own scratch
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

// sequence applies the feed's Sequencing to a decoded batch.
func (f *feed) sequence(b *pollBatch) {
	if !f.sequencing || len(b.batch) < 2 {
		return
	}
	if n := b.seq.sequence(b.batch); n > 0 {
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

// release drops b's references into the poll it was taken from, once its
// copies are delivered: a decoded string pins the whole decompressed
// producer batch it points into (~150 KB), and four lagging feeds' idle
// batches held ~1 GB that way. The last batch to release a poll recycles it.
func (b *pollBatch) release() {
	clear(b.batch)
	clear(b.marks)
	clear(b.dlq)
	b.epochs = b.epochs[:0]
	if b.shared != nil {
		b.shared.unref()
		b.shared = nil
	}
	b.mem = nil
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
