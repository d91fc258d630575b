package director

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runSolo reads the feed's sources with its own consumer group until ctx
// ends, or until the client cannot be built: the feed then stays in the
// error state.
func (f *feed) runSolo(ctx context.Context, p *pipeline, pooled bool) {
	f.mship.session = f.m.cfg.SessionTimeout
	commits := []kgo.Opt{kgo.DisableAutoCommit()} // commitOwn, from the ledger
	if !f.ledgerCommits() {
		commits = []kgo.Opt{kgo.AutoCommitMarks(), kgo.AutoCommitInterval(time.Second), kgo.AutoCommitCallback(f.mship.committed)}
	}
	cl, err := f.m.cfg.Client.NewClient(readerOpts(pooled, append(commits,
		kgo.ConsumerGroup(f.group),
		kgo.ConsumeTopics(f.spec.Sources...),
		// Deleted-by-retention offsets restart at the log start; the
		// gap is counted as lost, never silently skipped to the end.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(f.m.cfg.SessionTimeout),
		kgo.HeartbeatInterval(heartbeat(f.m.cfg.SessionTimeout)),
		kgo.OnPartitionsAssigned(f.assigned),
		kgo.OnPartitionsRevoked(f.revoked),
		kgo.OnPartitionsLost(f.partitionsLost),
	)...)...)
	if err != nil {
		f.setErr(err)
		f.setState(StateError)
		f.log.Error("feed: kafka client", "err", err)
		return
	}
	f.cl = cl
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := f.commitOwn(cctx, cl); err != nil {
			f.log.Warn("feed: final commit", "err", err)
		}
		cancel()
		cl.Close()
	}()
	if f.ledgerCommits() {
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			commitEvery(cctx, func(ctx context.Context) error { return f.commitOwn(ctx, cl) }, func(err error) {
				f.log.Info("feed: commit not accepted; what it carried is committed later, or by the partitions' new owner", "err", err)
			})
		}()
		defer func() { stop(); <-done }() // before the final commit
	}

	rd := &reader{
		src: cl, maxBatch: f.m.cfg.MaxBatch, log: f.log, what: "feed", failed: f.setErr,
		proof: &f.mship.lastProof, prove: func(ctx context.Context) error { return f.mship.prove(ctx, cl, f.group) },
		retry: heartbeat(f.m.cfg.SessionTimeout), // unread nil: a poll after a pause is held until proven
	}
	polls := newPollPool()
	for ctx.Err() == nil {
		// A free slot first, then the poll: while the sender is busy,
		// copies gather in the client into one larger batch.
		var b *pollBatch
		select {
		case b = <-p.free:
		case <-p.sent: // the sender stopped: ctx ended
			continue
		case <-ctx.Done():
			continue
		}
		f.repositionKept(cl)
		fs := rd.poll(ctx, ctx, nil)
		if ctx.Err() != nil || !f.takePoll(ctx, polls, fs, b) {
			p.free <- b
			continue
		}
		p.work <- b // never blocks: at most pipelineDepth batches exist
	}
	// ctx ended: the sender stops with the batch in hand; nothing after it
	// is marked, and the marks so far are committed as the client closes.
	p.close()
}

// takePoll decodes the poll fs of the feed's own reader and takes it into b
// (feed.take); false when there was nothing to take.
func (f *feed) takePoll(ctx context.Context, polls pollPool, fs kgo.Fetches, b *pollBatch) bool {
	dp := polls.decode(fs, f.calls)
	if dp == nil {
		return false
	}
	took := f.take(ctx, dp, b)
	dp.unref() // the reader's reference: b holds its own if it took
	return took
}

// ledgerCommits reports whether the feed's own reader commits what its
// ledger confirmed (commitOwn): copy and call-record feeds. xdr feeds mark
// the low water of their open transactions for franz-go's commits instead.
func (f *feed) ledgerCommits() bool { return f.xdrStage() == nil }

// errCommitMembership refuses a commit that franz-go would send for a
// membership other than the one whose assignment the ledger holds.
var errCommitMembership = errors.New("the group membership changed since the offsets were taken")

// commitOwn commits, through the feed's group member, what the ledger
// confirmed of the partitions it holds (xdr feeds: franz-go's marks). The
// commit carries the member and generation whose assignment the reader
// took, and nothing else: franz-go holds a commit while the client joins
// the group again (after a pause past the session timeout, say), and would
// then send it as the new member, which the broker accepts, with offsets
// of the old assignment that another node may have committed past since.
// The offsets are those of partitions still owned in the epoch they were
// taken in.
func (f *feed) commitOwn(ctx context.Context, cl *kgo.Client) error {
	if !f.ledgerCommits() {
		return cl.CommitMarkedOffsets(ctx)
	}
	f.commitMu.Lock()
	defer f.commitMu.Unlock()
	member, gen := cl.GroupMetadata()
	if !f.mship.holds(member) {
		return nil // not joined, or refused, or joined again and its assignment not taken yet
	}
	offs := f.led.pending()
	if len(offs) == 0 {
		return nil
	}
	m := map[string]map[int32]kgo.EpochOffset{}
	for k, c := range offs {
		if m[k.topic] == nil {
			m[k.topic] = map[int32]kgo.EpochOffset{}
		}
		m[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: c.at}
	}
	check := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		if req.MemberID != member || req.Generation != gen {
			return errCommitMembership
		}
		return nil
	})
	var reqErr, partErr error
	cl.CommitOffsetsSync(check, m, func(cl *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		f.mship.committed(cl, req, resp, err)
		if err != nil {
			reqErr = err
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					delete(offs, tp{rt.Topic, rp.Partition})
					if partErr == nil {
						partErr = fmt.Errorf("%s/%d: %w", rt.Topic, rp.Partition, err)
					}
				}
			}
		}
	})
	if reqErr != nil {
		return fmt.Errorf("commit: %w", reqErr)
	}
	f.led.committedUpTo(offs)
	if partErr != nil {
		return fmt.Errorf("commit: %w", partErr)
	}
	return nil
}

// readerOpts are the fetch options of every reader of copies (a tap, a
// feed's own reader, a detached member's catch-up) followed by opts; pooled
// takes decompressed batches and records from pools (decodedPoll.unref).
// A reader that is behind always has a full fetch buffered besides the
// batches in its pipeline. NF copies compress well (snappy, 3 KB records),
// so franz-go's 50 MB default would hold several times that decompressed
// per lagging feed; 4 MB compressed is still more than a batch, and a
// lagging feed catches up in few fetches.
func readerOpts(pooled bool, opts ...kgo.Opt) []kgo.Opt {
	base := []kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond), kgo.FetchMaxBytes(4 << 20)}
	if pooled {
		base = append(base, kgo.WithPools(newDecompressPool(), newRecordPool()))
	}
	return append(base, opts...)
}

// assigned (kgo.OnPartitionsAssigned) starts each new partition's epoch in
// the ledger where consumption resumes; a commit below the log start means
// copies were deleted by retention unread.
//
// A new member id with partitions kept from the old one: the group dropped
// the old member (a node paused or cut off past its session timeout), and
// franz-go joined again as a new one without calling OnPartitionsLost,
// keeping the partitions the new assignment gives it back, and its cursor
// in them. Another node may have read and committed them meanwhile: they
// are lost from the old membership, and start again from their commits,
// like new ones (the cursor moves there before the next poll). Without
// this, the reader would deliver again everything the other node delivered
// meanwhile, and move the group's commits back.
func (f *feed) assigned(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	defer f.m.upstreamRebalance(f.spec.Name, true)
	member, _ := cl.GroupMetadata()
	defer f.mship.took(member) // once the ledger holds the new assignment
	var kept map[string][]int32
	if f.mship.renewed(member) {
		kept = f.led.owned()
		eachPart(parts, func(k tp) {
			kept[k.topic] = slices.DeleteFunc(kept[k.topic], func(p int32) bool { return p == k.partition })
		})
		maps.DeleteFunc(kept, func(_ string, ps []int32) bool { return len(ps) == 0 })
		if len(kept) > 0 {
			f.log.Warn("feed: rejoined as a new group member; positioning the partitions it kept again", "partitions", len(kept))
			f.forgetParts(kept, true)
			parts = maps.Clone(parts)
			for t, ps := range kept {
				parts[t] = append(slices.Clone(parts[t]), ps...)
			}
		}
	}
	committed, err := f.m.committed(ctx, f.group, parts)
	if err != nil {
		f.log.Warn("feed: fetch committed offsets", "err", err)
	}
	var starts kadm.ListedOffsets
	if err == nil {
		if starts, err = f.m.adm.ListStartOffsets(ctx, slices.Collect(maps.Keys(parts))...); err != nil {
			f.log.Warn("feed: list start offsets", "err", err)
		}
	}
	for t, ps := range parts {
		for _, p := range ps {
			k, at := tp{t, p}, int64(-1)
			if err == nil {
				if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
					at = f.startAt(k, committed, starts)
				}
			}
			epoch := f.led.assign(k, at)
			if slices.Contains(kept[t], p) {
				f.led.keep(k, epoch) // the cursor moves to at before the next poll
			}
		}
	}
}

// repositionKept moves the reader to where assigned started the partitions
// it kept across a new membership (their commits; the log start without
// one). Called by the polling goroutine, between two polls. A partition
// revoked, lost or assigned again since (a later epoch) is left alone: the
// offset assigned read is of an older assignment, behind what the other
// node committed since (an xdr feed, which commits franz-go's marks, would
// have moved the group's commit back with it).
func (f *feed) repositionKept(cl *kgo.Client) {
	setOffsets(cl, f.led.takeRepositions())
}

// revoked (kgo.OnPartitionsRevoked) commits what was marked, through the
// group member (so with its generation), and ends the partitions' epochs.
//
// After a pause past the session timeout, franz-go may revoke as a new
// member, from the new assignment's point of view, partitions another node
// has owned and committed past since: what it marked is the old
// membership's, and it commits nothing of them, as for lost partitions
// (tap.revoked); nor does a member not proven since a pause.
func (f *feed) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	if member, _ := cl.GroupMetadata(); f.mship.renewed(member) {
		f.log.Warn("feed: revoked as a new group member; committing nothing of the old membership", "partitions", len(parts))
		f.partitionsLost(ctx, cl, parts)
		return
	}
	if f.mship.stale() {
		pctx, cancel := context.WithTimeout(ctx, f.m.cfg.SessionTimeout/3)
		err := f.mship.prove(pctx, cl, f.group)
		cancel()
		if err != nil {
			f.log.Warn("feed: revoked after a pause without a proven membership; committing nothing", "err", err)
			f.partitionsLost(ctx, cl, parts)
			return
		}
	}
	f.m.upstreamRebalance(f.spec.Name, false)
	if err := f.commitOwn(ctx, cl); err != nil {
		f.log.Warn("feed: commit on revoke", "err", err)
	}
	f.forgetParts(parts, false)
}

// partitionsLost (kgo.OnPartitionsLost) ends the partitions' epochs without
// committing: another node owns them now (see tap.partitionsLost).
func (f *feed) partitionsLost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	f.m.upstreamRebalance(f.spec.Name, false)
	f.forgetParts(parts, true)
}

// forgetParts ends the epochs of parts in the ledger (lost: another node
// may own them already), and has an xdr feed drop what it holds of them.
func (f *feed) forgetParts(parts map[string][]int32, lost bool) {
	eachPart(parts, func(k tp) {
		if lost {
			f.led.lose(k)
		} else {
			f.led.revoke(k)
		}
	})
	if xs := f.xdrStage(); xs != nil {
		xs.dropParts(parts)
	}
}

// checkGap counts copies skipped between where the reader should have gone
// on in k (h.expected) and first, the first copy it fetched, if retention
// deleted them (a gap can also be transaction markers, which are not
// losses).
func (f *feed) checkGap(ctx context.Context, k tp, h handed, first int64) {
	if !h.gap {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	starts, err := f.m.adm.ListStartOffsets(lctx, k.topic)
	if err != nil {
		return
	}
	if s, ok := starts.Lookup(k.topic, k.partition); ok && s.Err == nil && s.Offset > h.expected {
		f.countLost(k.topic, k.partition, min(s.Offset, first)-h.expected)
	}
}

func (f *feed) countLost(t string, p int32, n int64) {
	f.lost.Add(uint64(n))
	f.mLost.Add(float64(n))
	f.setErr(errors.New("copies deleted by retention before delivery"))
	f.log.Error("feed: copies deleted by retention before delivery", "topic", t, "partition", p, "lost", n)
}

// heartbeat is how often a reader heartbeats its group: a tenth of the
// session timeout, at most 250 ms. Every member learns of a rebalance at
// its next heartbeat, so this bounds how far apart the nodes' readers stop
// and start; correlating stages hold their clocks across that (see
// upstreamRebalance).
func heartbeat(session time.Duration) time.Duration {
	return min(session/10, 250*time.Millisecond)
}
