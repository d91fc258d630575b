package director

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// An exactly-once kafka feed ("exactly_once": true) reads, filters and
// produces in Kafka transactions tied to the offsets it consumed
// (read-process-write): each poll's copies are produced to the feed's topic,
// and its dead letters to the dead-letter topic, in one transaction that
// also commits the poll's offsets to the feed's consumer group. Either all
// of it is committed or none: a kill -9 mid-poll, a node failover, a broker
// restart leave an aborted transaction, whose records a read_committed
// consumer never sees, and offsets where the last committed transaction
// left them, from which the poll is read and produced again.
//
// It is franz-go's GroupTransactSession: one client that is the feed's
// group member and its transactional producer. A zombie (a node paused past
// its session, whose partitions the group gave to another node) is fenced
// by the group generation its offset commit carries (KIP-447), and its
// transaction aborted; a node that restarts under the same transactional id
// (the feed and the node's name) fences its earlier self's. The feed reads
// on its own, never on a tap (a tap's commits are not the feed's
// transaction), and produces to the director's own Kafka: a transaction
// cannot span clusters (Validate refuses "kafka" targets).
//
// Cost: one transaction per poll (AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit, EndTxn and the markers), so polls are batched larger
// (MaxBatch copies) and a read_committed consumer sees a poll's copies
// only when its transaction commits. BENCHMARKS.md has the figures.

// txnTimeout bounds how long a transaction of a node that died stays open
// (and holds read_committed consumers at it) before the broker aborts it.
const txnTimeout = 10 * time.Second

// txnID is the feed's transactional id on this node.
func (f *feed) txnID() string {
	node := f.m.cfg.Node
	if node == "" {
		node = "node"
	}
	return "signalbox-eos-" + f.spec.Name + "-" + node
}

func (f *feed) runTransactional(ctx context.Context) {
	sess := f.txnSession(ctx)
	if sess == nil {
		return
	}
	defer sess.Close()
	if !f.ensureOutputs(ctx, sess.Client(), f.outputTopic()) {
		return
	}
	f.setState(StateConnected)

	t := &txnPoll{f: f, sess: sess, polls: newPollPool()}
	f.transactLoop(ctx, sess, 0, t.run, "feed: transaction aborted by a rebalance; the poll is read again")
}

// transactLoop polls sess and hands each poll to run, which produces it in
// a transaction, until ctx ends. A poll ends after every (when not 0), for
// what a feed does when no copies come; else empty polls are not handed.
// A transaction that failed is retried with backoff; one aborted by a
// rebalance is not a failure: the session has rewound to the committed
// offsets, and the next poll reads the copies again.
func (f *feed) transactLoop(ctx context.Context, sess *kgo.GroupTransactSession, every time.Duration,
	run func(context.Context, kgo.Fetches) (bool, error), aborted string) {
	rd := &reader{src: sess, maxBatch: f.m.cfg.MaxBatch, log: f.log, what: "feed", failed: f.setErr} // fenced by its transactions
	for attempt := 0; ctx.Err() == nil; {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if every > 0 {
			pctx, cancel = context.WithTimeout(ctx, every)
		}
		fs := rd.poll(ctx, pctx, nil)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if every == 0 && fs.NumRecords() == 0 {
			continue
		}
		committed, err := run(ctx, fs)
		if err == nil {
			if !committed {
				f.log.Info(aborted)
			}
			attempt = 0
			continue
		}
		if !f.retryAfter(ctx, err, attempt, "feed: transaction not committed") {
			break
		}
		attempt++
	}
}

// txnErrs keeps what went wrong in a transaction's produces: the first
// error, and the largest record the target refused as too large, by a key
// K that finds the record again (a source record's place, a correlation
// id). The broker refuses a whole batch for one record over its limit, so
// only the largest is dead-lettered in the next transactions; if one is
// refused again, the next largest goes.
type txnErrs[K comparable] struct {
	mu    sync.Mutex
	first error
	big   K
	bigN  int // big's size; 0 when none was refused
	// tooLarge are the records refused in aborted transactions, which the
	// next transactions dead-letter instead (tooLargeBefore). Only the
	// transaction's goroutine uses it.
	tooLarge map[K]bool
}

// tooLargeMax bounds txnErrs.tooLarge.
const tooLargeMax = 10000

func (e *txnErrs[K]) failed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		e.first = err
	}
}

// produce produces r in sess's transaction, keeping its error.
func (e *txnErrs[K]) produce(ctx context.Context, sess *kgo.GroupTransactSession, r *kgo.Record) {
	sess.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			e.failed(err)
		}
	})
}

// refused notes that the produce of the record of key k, n bytes, failed.
func (e *txnErrs[K]) refused(k K, n int, err error) {
	if broker.IsTooLarge(err) {
		e.mu.Lock()
		if n > e.bigN {
			e.big, e.bigN = k, n
		}
		e.mu.Unlock()
	}
	e.failed(err)
}

// tooLargeBefore reports whether the record of key k was refused as too
// large in an aborted transaction, and forgets it: it is dead-lettered now.
func (e *txnErrs[K]) tooLargeBefore(k K) bool {
	if !e.tooLarge[k] {
		return false
	}
	delete(e.tooLarge, k)
	return true
}

// end waits for every produce of the transaction, then commits it, with its
// offsets (commit with them ctx's PreTxnCommitFnContext), when all
// succeeded, else aborts it. It returns whether it committed, and the
// first produce error or the session's. It clears the produce errors, and
// notes the largest record refused as too large when it did not commit.
func (e *txnErrs[K]) end(ctx context.Context, sess *kgo.GroupTransactSession, commit context.Context) (bool, error) {
	if err := sess.Client().Flush(ctx); err != nil {
		e.failed(err)
	}
	e.mu.Lock()
	perr, big, bigN := e.first, e.big, e.bigN
	var none K
	e.first, e.big, e.bigN = nil, none, 0
	e.mu.Unlock()
	try := kgo.TryCommit
	if perr != nil {
		try = kgo.TryAbort
	}
	committed, err := sess.End(commit, try)
	if err == nil && perr != nil {
		err = perr
	}
	if !committed && bigN > 0 && len(e.tooLarge) < tooLargeMax {
		if e.tooLarge == nil {
			e.tooLarge = map[K]bool{}
		}
		e.tooLarge[big] = true
	}
	return committed, err
}

// outputTopic is the topic an exactly-once feed produces to, as it is
// created when missing.
// outputPartitions is how many partitions a feed's output topic is made
// with when the director makes it (the kafka sink's default too).
const outputPartitions = 6

func (f *feed) outputTopic() broker.TopicSpec {
	return broker.TopicSpec{Name: f.spec.Topic, Partitions: outputPartitions}
}

// txnSession opens the feed's transactional group session, retrying until
// it opens or ctx ends (nil).
func (f *feed) txnSession(ctx context.Context, opts ...kgo.Opt) *kgo.GroupTransactSession {
	f.setReader(ReaderOwn)
	for attempt := 0; ; attempt++ {
		sess, err := kgo.NewGroupTransactSession(append(append(f.m.cfg.Client.Opts(),
			kgo.TransactionalID(f.txnID()),
			kgo.TransactionTimeout(txnTimeout),
			kgo.ConsumerGroup(f.group),
			kgo.ConsumeTopics(f.spec.Sources...),
			// Never reset a partition it consumed: a leader election whose
			// new epoch the broker cannot place (KIP-320's undefined
			// epoch) resets a consumer to its reset offset, which
			// re-produced whole polls in committed transactions (kfake
			// after ShufflePartitionLeaders: 8,000 of 20,000 copies twice).
			// Kept, the cursor stays where the transactions left it. The
			// price: a partition whose unread copies retention deleted
			// stops with OFFSET_OUT_OF_RANGE in the feed's last error
			// rather than skip them.
			kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.SessionTimeout(f.m.cfg.SessionTimeout),
			kgo.HeartbeatInterval(heartbeat(f.m.cfg.SessionTimeout)),
			kgo.DefaultProduceTopic(f.spec.Topic),
			kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		), opts...)...)
		if err == nil {
			return sess
		}
		f.setErr(err)
		f.setState(StateError)
		f.log.Error("feed: transactional kafka client", "err", err)
		if !sleepCtx(ctx, f.backoff(attempt)) {
			return nil
		}
	}
}

// ensureOutputs checks that the topics a transactional feed produces to
// exist, creating them when the director creates topics; it retries (the
// error, naming a missing topic, in the feed's status) until they do, and is
// false if ctx ended first.
func (f *feed) ensureOutputs(ctx context.Context, cl *kgo.Client, topics ...broker.TopicSpec) bool {
	for attempt := 0; ; attempt++ {
		err := broker.EnsureTopics(ctx, cl, topics, f.m.cfg.CreateTopics)
		if err == nil {
			return true
		}
		if !f.retryAfter(ctx, err, attempt, "feed: output topics") {
			return false
		}
	}
}

// txnPoll produces one poll in one transaction.
type txnPoll struct {
	f     *feed
	sess  *kgo.GroupTransactSession
	polls pollPool
	b     pollBatch
	errs  txnErrs[recordAt] // by the source record of a copy
}

func (t *txnPoll) run(ctx context.Context, fs kgo.Fetches) (bool, error) {
	f, b := t.f, &t.b
	b.reset()
	if err := t.sess.Begin(); err != nil {
		return false, err
	}
	if dp := t.polls.decode(fs, false); dp != nil {
		defer dp.unref() // once the transaction ended: its records point into the poll
		dp.each(func(r *kgo.Record, c *nfcopy.Copy, err error) {
			at := recordAt{tp{r.Topic, r.Partition}, r.Offset}
			if t.errs.tooLargeBefore(at) {
				// A copy admitted before: its fields name it in the dead letter.
				b.dlq = f.undeliverable(b.dlq, c, "the target refused the record as too large")
				return
			}
			if f.admit(b, r, c, err, false) {
				n := len(r.Value)
				t.sess.Produce(ctx, &kgo.Record{Topic: f.spec.Topic, Key: []byte(c.CorrelationID), Value: c.Raw}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.errs.refused(at, n, err)
					}
				})
			}
		})
	}
	for _, d := range b.dlq {
		truncateDeadLetter(d)
		t.errs.produce(ctx, t.sess, d)
	}
	// Every produce's outcome first, to choose between committing the
	// poll's offsets with the transaction and aborting both.
	committed, err := t.errs.end(ctx, t.sess, ctx)
	if committed && err == nil {
		f.countDelivered(b.batch)
	}
	return committed, err
}

// recordAt is a record's place: its partition and offset.
type recordAt struct {
	tp
	off int64
}
