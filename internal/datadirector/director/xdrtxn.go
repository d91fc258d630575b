package director

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An exactly-once xdr feed ("type": "xdr", "exactly_once": true, its output a
// topic of the director's own Kafka) correlates in Kafka transactions, as an
// exactly-once kafka feed relays (txnfeed.go): one transaction carries the
// records a poll completed or timed out, its dead letters, and the commit of
// the feed's offsets.
//
// A record is made of copies read over several polls, so what is committed
// of a partition is the lowest offset of a copy of a transaction still open
// (its low water), and above it are copies of records already produced. So
// each transaction also writes to the feed's compacted checkpoint topic
// (CheckpointTopic), for each partition whose place moved, a checkpoint:
// where the reader is (next) and the offsets of the copies of the
// transactions still open, the first of which (else next) is the offset
// the transaction commits.
//
// A reader that takes a partition up (after a restart, a node failing over,
// an aborted transaction) reads from the committed offset, adds to its
// correlator the copies the checkpoint names, and skips the others below
// next: it holds the open transactions the last committed transaction left,
// and so makes each record once. The checkpoint and the offsets commit
// together, so they agree; one that does not match the commit (the feed ran
// at-least-once before) is not used, and records of the copies above the
// commit may then be made again (signalbox_feed_xdr_checkpoints_total
// counts each outcome).
//
// An abort, or partitions taken away, resets the correlator and rewinds
// every partition the feed holds to its commit: what the correlator held
// beyond the last committed transaction is made again from the checkpoints.
//
// What is not exactly once: a copy that arrives after a restart for a
// transaction whose record was produced before it opens a new transaction
// (the tombstone that would have counted it late is not checkpointed), and
// the record store is written after the commit (a kill between the two
// leaves those records out of it). A record the topic refuses as too large
// aborts its transaction once; made again, it goes to the dead-letter topic. Several nodes split the transactions as
// a single-stage xdr feed does at-least-once; a re-keyed feed is refused.

// xdrTxn is an exactly-once xdr feed's reader.
type xdrTxn struct {
	f     *feed
	sess  *kgo.GroupTransactSession
	adm   *kadm.Client
	xs    *xdrStage
	polls pollPool
	b     pollBatch

	// errs by correlation id: a record refused as too large in an aborted
	// transaction is made again from the checkpoints, and dead-lettered.
	errs txnErrs[string]

	// revoked is set when the group takes partitions away (or they are
	// lost): the correlator is reset after the transaction.
	revoked atomic.Bool

	next      map[tp]int64      // where the reader is in each partition it took up
	replay    map[tp]*replaying // partitions below their checkpoint's next
	committed map[tp]checkpoint // each partition's last committed checkpoint
	commitAt  map[tp]int64      // this transaction's offsets to commit
	srcTP     []tp              // the correlator's source numbers
	open      map[tp][]int64    // scratch of checkpoints
	cps       []pendingCheckpoint
}

// replaying is a partition read again below its checkpoint's next: only the
// copies of the open transactions are added.
type replaying struct {
	cp checkpoint
	i  int // cp.open[i] is the next open copy to come
}

// wants reports whether the copy at off is one of the checkpoint's open
// ones; offsets come in order.
func (r *replaying) wants(off int64) bool {
	for r.i < len(r.cp.open) && r.cp.open[r.i] < off {
		r.i++ // a copy compaction or an aborted transaction left out
	}
	if r.i < len(r.cp.open) && r.cp.open[r.i] == off {
		r.i++
		return true
	}
	return false
}

type pendingCheckpoint struct {
	k  tp
	cp checkpoint
}

func (f *feed) runTransactionalXDR(ctx context.Context) {
	t := &xdrTxn{f: f, polls: newPollPool(), next: map[tp]int64{}, replay: map[tp]*replaying{}, committed: map[tp]checkpoint{},
		commitAt: map[tp]int64{}, open: map[tp][]int64{}}
	taken := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
		if len(parts) > 0 {
			t.revoked.Store(true)
		}
	}
	xs, err := f.newXDRStage(nil, true)
	if err != nil { // validated before: not expected
		f.setErr(err)
		f.setState(StateError)
		f.log.Error("feed: xdr correlator", "err", err)
		return
	}
	defer func() {
		if xs.reg != nil {
			xs.reg.unregisterAll()
		}
	}()
	t.xs = xs
	f.xsp.Store(xs)
	t.sess = f.txnSession(ctx, kgo.OnPartitionsRevoked(taken), kgo.OnPartitionsLost(taken))
	if t.sess == nil {
		return
	}
	defer t.sess.Close()
	t.adm = kadm.NewClient(t.sess.Client())
	if !f.ensureOutputs(ctx, t.sess.Client(), f.outputTopic(), checkpointTopicSpec(f.spec.Name)) {
		return
	}
	f.setState(StateConnected)

	// Polls end every tick, so that timed-out transactions go out when no
	// copies come.
	f.transactLoop(ctx, t.sess, xs.tick, t.run, "xdr feed: transaction aborted by a rebalance; read again from the checkpoints")
}

// run correlates one poll and produces what it made in one transaction;
// with nothing to produce or commit, it begins none (true).
func (t *xdrTxn) run(ctx context.Context, fs kgo.Fetches) (bool, error) {
	f, xs, b := t.f, t.xs, &t.b
	if t.revoked.Load() {
		// Partitions were taken away since the last transaction: what the
		// correlator holds may be theirs, and this poll may hold their
		// copies. Start again from the commits of the partitions kept.
		t.reset()
		return true, nil
	}
	if err := t.takeUp(ctx, fs); err != nil {
		t.reset()
		return false, err
	}
	b.reset()
	dp := t.polls.decode(fs, false)
	if dp != nil {
		defer dp.unref() // once the transaction ended: the correlator's input points into the poll
		for _, pp := range dp.parts {
			k := pp.k
			rp := t.replay[k]
			for j, r := range pp.recs {
				t.next[k] = r.Offset + 1
				if rp != nil {
					if r.Offset >= rp.cp.next {
						delete(t.replay, k)
						rp = nil
					} else if !rp.wants(r.Offset) {
						continue // in a record the last commit produced
					}
				}
				f.admit(b, r, dp.arena[pp.first+j], dp.errs[pp.first+j], false)
			}
			if rp != nil && t.next[k] >= rp.cp.next {
				delete(t.replay, k)
			}
		}
	}
	xs.recs = xs.recs[:0]
	for i, c := range b.batch {
		xs.recs = xs.x.AddFrom(c, t.src(b.srcs[i].k), b.srcs[i].off, xs.recs)
	}
	xs.recs = xs.x.Expire(xs.now(), xs.recs)
	xs.encode()
	t.checkpoints()
	if len(xs.out) == 0 && len(b.dlq) == 0 && len(t.cps) == 0 {
		xs.store()
		return true, nil
	}

	if err := t.sess.Begin(); err != nil {
		t.reset()
		return false, err
	}
	for _, c := range xs.out {
		if t.errs.tooLargeBefore(c.CorrelationID) {
			b.dlq = f.undeliverable(b.dlq, c, "the target refused the record as too large")
			continue
		}
		id := c.CorrelationID
		t.sess.Produce(ctx, &kgo.Record{Topic: f.spec.Topic, Key: []byte(id), Value: c.Raw}, func(r *kgo.Record, err error) {
			if err != nil {
				t.errs.refused(id, len(r.Value), err)
			}
		})
	}
	for _, d := range b.dlq {
		truncateDeadLetter(d)
		t.errs.produce(ctx, t.sess, d)
	}
	cpTopic := CheckpointTopic(f.spec.Name)
	for _, p := range t.cps {
		t.errs.produce(ctx, t.sess, &kgo.Record{Topic: cpTopic, Key: checkpointKey(p.k), Value: p.cp.appendTo(nil)})
	}
	committed, err := t.errs.end(ctx, t.sess, kgo.PreTxnCommitFnContext(ctx, t.rewriteCommit))
	if committed && err == nil {
		for _, p := range t.cps {
			t.committed[p.k] = p.cp
		}
		xs.store()
		xs.delivered(xs.out)
		f.countDelivered(b.batch)
	}
	if !committed || err != nil || t.revoked.Load() {
		t.reset()
	}
	return committed, err
}

// src is the correlator's source number of partition k.
func (t *xdrTxn) src(k tp) uint32 {
	src, ok := t.xs.srcIdx[k]
	if !ok {
		src = uint32(len(t.srcTP))
		t.xs.srcIdx[k] = src
		t.srcTP = append(t.srcTP, k)
	}
	return src
}

// checkpoints sets t.commitAt for every partition taken up and t.cps to the
// checkpoints that differ from the committed ones.
func (t *xdrTxn) checkpoints() {
	for k, o := range t.open {
		t.open[k] = o[:0]
	}
	t.xs.x.Open(func(src uint32, off int64) {
		k := t.srcTP[src]
		t.open[k] = append(t.open[k], off)
	})
	t.cps = t.cps[:0]
	for k, next := range t.next {
		open := t.open[k]
		slices.Sort(open)
		cp := checkpoint{next: next, open: open}
		if rp := t.replay[k]; rp != nil {
			// Not read up to the checkpoint's next yet: the open copies
			// still to come are open still.
			cp.next = max(next, rp.cp.next)
			cp.open = append(slices.Clip(open), rp.cp.open[rp.i:]...)
		}
		t.commitAt[k] = cp.commit()
		if old, ok := t.committed[k]; ok && old.equal(&cp) {
			continue
		}
		cp.open = slices.Clone(cp.open)
		t.cps = append(t.cps, pendingCheckpoint{k, cp})
	}
}

// rewriteCommit commits each partition at its checkpoint's commit offset
// rather than where the reader is (PreTxnCommitFnContext); franz-go takes the
// offsets as sent for the committed ones.
func (t *xdrTxn) rewriteCommit(req *kmsg.TxnOffsetCommitRequest) error {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			p := &rt.Partitions[j]
			if at, ok := t.commitAt[tp{rt.Topic, p.Partition}]; ok && at < p.Offset {
				p.Offset, p.LeaderEpoch = at, -1
			}
		}
	}
	return nil
}

// takeUp reads the checkpoints of the partitions first read in fs, and
// starts each where its checkpoint says.
func (t *xdrTxn) takeUp(ctx context.Context, fs kgo.Fetches) error {
	fresh := map[tp]int64{} // partition → the first offset read
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		k := tp{p.Topic, p.Partition}
		if _, ok := t.next[k]; !ok && len(p.Records) > 0 {
			fresh[k] = p.Records[0].Offset
		}
	})
	if len(fresh) == 0 {
		return nil
	}
	f := t.f
	co := t.sess.Client().CommittedOffsets()
	at := func(k tp) int64 {
		if c, ok := co[k.topic][k.partition]; ok && c.Offset >= 0 {
			return c.Offset
		}
		return fresh[k]
	}
	cps, err := f.readCheckpoints(ctx, t.adm)
	if err != nil {
		return err
	}
	for k := range fresh {
		from := at(k)
		t.next[k] = from
		cp, ok := cps[k]
		outcome := "missing"
		switch {
		case ok && cp.commit() == from:
			outcome = "restored"
			t.committed[k] = cp
			if len(cp.open) > 0 || cp.next > from {
				t.replay[k] = &replaying{cp: cp}
			}
		case ok:
			outcome = "mismatched"
			f.log.Warn("xdr feed: the checkpoint is not of the committed offset; records of the copies above it may be made again",
				"topic", k.topic, "partition", k.partition, "committed", from, "checkpoint", cp.commit())
		}
		f.m.m.checkpoints.WithLabelValues(f.spec.Name, outcome).Inc()
	}
	return nil
}

// reset forgets what the correlator holds and rewinds every partition the
// feed holds to its commit, to be taken up again from its checkpoint.
func (t *xdrTxn) reset() {
	t.revoked.Store(false)
	t.xs.x.Reset()
	clear(t.next)
	clear(t.replay)
	clear(t.committed)
	clear(t.commitAt)
	cl := t.sess.Client()
	at := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range cl.CommittedOffsets() {
		for p, o := range ps {
			if o.Offset >= 0 {
				if at[topic] == nil {
					at[topic] = map[int32]kgo.EpochOffset{}
				}
				at[topic][p] = o
			}
		}
	}
	cl.SetOffsets(at)
}
