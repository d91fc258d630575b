package director

import (
	"context"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// deliver sends one poll's copies and then marks its records for commit;
// false when ctx ended before the sink confirmed (nothing is marked then).
func (f *feed) deliver(ctx context.Context, b *pollBatch) bool {
	if len(b.batch) > 0 && !f.send(ctx, b) {
		return false
	}
	f.confirmed(ctx, b)
	return true
}

// deliverPipelined is the sender of a feed whose sink confirms apart from
// writing: it writes each batch as soon as it is decoded and checks, in
// between, which written batches the sink has confirmed, marking those in
// order. When a write or a confirmation fails, every written but unconfirmed
// batch is written again, in order, after the usual backoff. It returns when
// ctx ends.
func (f *feed) deliverPipelined(ctx context.Context, ps PipelinedSink, work <-chan *pollBatch, free chan<- *pollBatch) {
	q := &inFlight{f: f, ps: ps, shared: f.sink.shared}
	if f.spec.stage == stageRekey {
		q.origin = f.sink.origin // a re-key stage's sink: each record says where its copy was read
	}
	const minWait, maxWait = 10 * time.Microsecond, 200 * time.Microsecond
	wait := minWait
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		confirmed, ok := q.confirm(ctx, free)
		if !ok {
			return
		}
		if confirmed {
			wait = minWait
		}
		var b *pollBatch
		if len(q.pend) == 0 {
			select {
			case b, ok = <-work:
			case <-ctx.Done():
				return
			}
		} else {
			timer.Reset(wait)
			select {
			case b, ok = <-work:
			case <-timer.C:
				wait = min(wait*2, maxWait)
				continue
			case <-ctx.Done():
				return
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		if !ok {
			return
		}
		if err := q.write(ctx, b); err != nil {
			q.pend = append(q.pend, written{b, 0})
			if !q.rewrite(ctx, err) {
				return
			}
		}
	}
}

// written is a batch written to a pipelined sink, and its ticket.
type written struct {
	b      *pollBatch
	ticket uint64
}

// inFlight is what a pipelined sink was written and has not confirmed,
// oldest first, and how to write a batch to it.
type inFlight struct {
	f      *feed
	ps     PipelinedSink
	shared SharedEncoder // takes the tap's shared encoding with a batch
	origin originWriter  // writes where each copy was read (a re-key stage)
	pend   []written
}

// write writes b after what is pending. A batch with nothing to write is
// confirmed with what precedes it.
func (q *inFlight) write(ctx context.Context, b *pollBatch) error {
	if len(b.batch) == 0 {
		t := uint64(0)
		if len(q.pend) > 0 {
			t = q.pend[len(q.pend)-1].ticket
		}
		q.pend = append(q.pend, written{b, t})
		return nil
	}
	var t uint64
	var err error
	switch {
	case q.shared != nil && b.shared != nil && b.shared.enc != nil:
		t, err = q.shared.WriteShared(ctx, b.batch, b.shared.enc)
	case q.origin != nil:
		t, err = q.origin.WriteWithHeaders(ctx, b.batch, originHeaders(b))
	default:
		t, err = q.ps.Write(ctx, b.batch)
	}
	if err != nil {
		return err
	}
	q.pend = append(q.pend, written{b, t})
	return nil
}

// rewrite writes every pending batch again, after the feed's backoff,
// until all are written; false when ctx ended.
func (q *inFlight) rewrite(ctx context.Context, err error) bool {
	todo := make([]*pollBatch, len(q.pend))
	n := 0
	for i := range q.pend {
		todo[i] = q.pend[i].b
		n += len(todo[i].batch)
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || !q.f.retryAfter(ctx, err, attempt, "feed: send failed, retrying", "batch", n) {
			return false
		}
		q.pend = q.pend[:0]
		err = nil
		for _, b := range todo {
			if err = q.write(ctx, b); err != nil {
				break
			}
		}
		if err == nil {
			return true
		}
	}
}

// confirm finishes what the sink has confirmed, oldest first, handing the
// batches back to free; confirmed says whether any was, ok false when ctx
// ended while a failed confirmation was being written again.
func (q *inFlight) confirm(ctx context.Context, free chan<- *pollBatch) (confirmed, ok bool) {
	for len(q.pend) > 0 {
		w := q.pend[0]
		done := true
		var err error
		if len(w.b.batch) > 0 || w.ticket > 0 {
			done, err = q.ps.Confirmed(w.ticket)
		}
		if err != nil {
			if !q.rewrite(ctx, err) {
				return confirmed, false
			}
			continue
		}
		if !done {
			break
		}
		if len(w.b.batch) > 0 {
			q.f.countDelivered(w.b.batch)
		}
		q.f.confirmed(ctx, w.b)
		q.pend = append(q.pend[:0], q.pend[1:]...)
		free <- w.b
		confirmed = true
	}
	return confirmed, true
}

// confirmed finishes a batch the sink confirmed: dead letters (the
// undecodable records and what the sink set aside), redelivery count, and
// its confirmation in the ledger (what a tap commits) and, for a feed's
// own reader, the marks for its commit.
func (f *feed) confirmed(ctx context.Context, b *pollBatch) {
	if rs := f.sink.rejecting; rs != nil && f.xdrStage() == nil { // a stage dead-letters its own
		cs, reasons := rs.Rejected()
		for i, c := range cs {
			b.dlq = f.undeliverable(b.dlq, c, reasons[i])
		}
	}
	if len(b.dlq) > 0 {
		f.flushDLQ(ctx, b.dlq)
	}
	for i, r := range b.marks {
		f.led.confirm(tp{r.Topic, r.Partition}, b.epochs[i], r.Offset, r.Timestamp.UnixNano())
	}
	if b.redelivered > 0 {
		f.redelivered.Add(b.redelivered)
		f.mRedelivered.Add(float64(b.redelivered))
	}
	f.markCommit(b)
	b.release()
}

func (f *feed) send(ctx context.Context, b *pollBatch) bool {
	batch := b.batch
	xs := f.xdrStage() // correlates the copies and delivers records to the sink
	for attempt := 0; ; attempt++ {
		var err error
		if xs != nil {
			err = xs.sendFrom(ctx, b)
		} else {
			err = f.sink.Send(ctx, batch)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil || !f.retryAfter(ctx, err, attempt, "feed: send failed, retrying", "batch", len(batch)) {
			return false
		}
	}
	f.countDelivered(batch)
	return true
}

// retryAfter records a failed delivery (attempt 0 is the first failure,
// logged as msg with logAttrs), waits the backoff and counts the retry. It
// is false if ctx ended while waiting.
func (f *feed) retryAfter(ctx context.Context, err error, attempt int, msg string, logAttrs ...any) bool {
	// Error and state first: a status that shows the failure counted shows
	// them too (a reader polling Failed then reading State saw connected).
	f.setErr(err)
	f.setState(StateDisconnected)
	f.failed.Add(1)
	f.mFailed.Inc()
	if attempt == 0 {
		f.log.Warn(msg, append([]any{"err", err}, logAttrs...)...)
	}
	if !sleepCtx(ctx, f.backoff(attempt)) {
		return false
	}
	f.retries.Add(1)
	f.mRetries.Inc()
	return true
}

// countDelivered counts a confirmed batch: copies, bytes, latency.
func (f *feed) countDelivered(batch []*nfcopy.Copy) {
	now := time.Now().UnixNano()
	var bytes uint64
	f.mu.Lock()
	for _, c := range batch {
		bytes += uint64(len(c.Raw))
		if c.Timestamp > 0 && now >= c.Timestamp {
			us := (now - c.Timestamp) / 1e3
			_ = f.hist.Current.RecordValue(us)
			f.mLatency.Observe(float64(now-c.Timestamp) / 1e9)
		}
	}
	wasConnected := f.state == StateConnected
	f.mu.Unlock()
	if !wasConnected {
		f.setState(StateConnected)
	}
	f.delivered.Add(uint64(len(batch)))
	f.mDelivered.Add(float64(len(batch)))
	f.bytes.Add(bytes)
	f.mBytes.Add(float64(bytes))
	if fe := f.sink.flows; fe != nil && f.mEvicted != nil {
		// The sink's count since it was made: what is new since the last look.
		n := fe.FlowsEvicted()
		if prev := f.evictedSeen.Swap(n); n > prev {
			f.mEvicted.Add(float64(n - prev))
		}
		n = fe.ResponsesFirst()
		if prev := f.respFirstSeen.Swap(n); n > prev {
			f.mRespFirst.Add(float64(n - prev))
		}
	}
}
