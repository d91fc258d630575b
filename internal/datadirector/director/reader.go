package director

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// poller is what a reader polls: a Kafka client, or a transactional
// session's.
type poller interface {
	PollRecords(ctx context.Context, maxPollRecords int) kgo.Fetches
}

// reader is the poll step the director's readers share — the tap
// (tap.consume), a feed's own reader (feed.runSolo), a detached member
// catching up (tapMember.readParts), a transactional feed
// (feed.transactLoop): poll; note fetch errors (one log line per burst);
// and after a pause hand a poll out only once the group membership it was
// read under is proven again, reading it again otherwise. What differs
// between them is configuration: which partitions the client reads, how
// membership is proven, who is told of errors, what moves the client back.
//
// After a pause (a stopped process, a long GC, a cut-off network) a poll
// may be of partitions the group has given away meanwhile, fetched before
// the pause. It is never dropped: if the group has given the partitions
// away, its callbacks follow and the new owner delivers it; if it still
// has this member (its coordinator was unreachable, or busy rebalancing),
// nothing else would move the client back. A reader whose client may move
// (unread) reads it again; one whose client must not (a feed's own reader:
// SetOffsets would mark the old position for franz-go's commits, see
// membership) holds it until membership is proven, then hands it out for
// the ledger to leave out what the group's callbacks took away meanwhile.
type reader struct {
	src      poller
	maxBatch int
	log      *slog.Logger
	what     string      // how its log lines start: "feed tap", "feed", ...
	failed   func(error) // told of each fetch error (the feeds' status)

	// proof is when the membership was last proven, nil for a reader
	// whose polls need no proof (a transactional session: the
	// transaction coordinator fences it). prove proves it now; unread
	// moves the client back to offsets (the first of a poll's
	// partitions) so that its next polls fetch them again, nil to hold
	// the poll instead; retry is the wait after a poll could not be
	// proven.
	proof  *lastProof
	prove  func(context.Context) error
	unread func(map[tp]int64)
	retry  time.Duration

	lastFetchErr, lastUnproven time.Time
}

// poll polls (with pctx, which may end sooner than ctx) and returns what
// may be taken: the poll, once proven after a pause; nothing when ctx
// ended or, with unread, membership could not be proven (the poll is read
// again after r.retry). polled, if not nil, is told of the poll first,
// proven or not.
func (r *reader) poll(ctx, pctx context.Context, polled func(kgo.Fetches)) kgo.Fetches {
	fs := r.src.PollRecords(pctx, r.maxBatch)
	if polled != nil {
		polled(fs)
	}
	if ctx.Err() != nil {
		return nil
	}
	r.fetchErrors(fs)
	if r.proof == nil || fs.Empty() || !r.proof.stale() {
		return fs
	}
	for {
		err := r.prove(ctx)
		if err == nil {
			return fs
		}
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(r.lastUnproven) > 10*time.Second {
			r.lastUnproven = time.Now()
			then := map[bool]string{false: "held until it is", true: "read again"}[r.unread != nil]
			r.log.Warn(r.what+": membership not proven after a pause; the poll is "+then, "err", err)
		}
		if r.unread != nil {
			r.unread(firstOffsets(fs))
			sleepCtx(ctx, r.retry)
			return nil
		}
		if !sleepCtx(ctx, r.retry) {
			return nil
		}
	}
}

// fetchErrors tells r.failed of a poll's fetch errors, logging one line
// per burst, not per poll.
func (r *reader) fetchErrors(fs kgo.Fetches) {
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		r.failed(err)
		if time.Since(r.lastFetchErr) > 10*time.Second {
			r.lastFetchErr = time.Now()
			r.log.Warn(r.what+": fetch", "topic", topic, "partition", p, "err", err)
		}
	})
}

// firstOffsets is the offset of the first record of each partition of fs.
func firstOffsets(fs kgo.Fetches) map[tp]int64 {
	to := map[tp]int64{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			to[tp{p.Topic, p.Partition}] = p.Records[0].Offset
		}
	})
	return to
}

// setOffsets moves cl to offsets (a direct or a group consumer: franz-go
// drops what it buffered of those partitions and fetches again).
func setOffsets(cl *kgo.Client, to map[tp]int64) {
	if len(to) > 0 {
		cl.SetOffsets(epochOffsets(to))
	}
}

// offsetsAt is every partition of parts at one offset, as franz-go takes
// them (kgo.ConsumePartitions, kgo.AdjustFetchOffsetsFn).
func offsetsAt(parts map[tp]bool, at kgo.Offset) map[string]map[int32]kgo.Offset {
	offs := map[string]map[int32]kgo.Offset{}
	for k := range parts {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.Offset{}
		}
		offs[k.topic][k.partition] = at
	}
	return offs
}
