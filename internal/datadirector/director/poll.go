package director

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// The one decode path. Every reader of copies — a tap, a feed's own
// consumer group, a detached tap member catching up, a transactional
// session — turns each poll into a decodedPoll (pollPool.decode): every
// record decoded once, whatever number of feeds take it. A feed then takes
// its share into one of its pipeline's batches (feed.take): the records
// its ledger says are its own and new, through its directions, filter and
// sequencing. Transactional feeds, whose offsets go with their
// transactions rather than through a ledger, walk the poll themselves
// (decodedPoll.each).
//
//	reader ──poll──▶ decodedPoll ──feed.take──▶ pollBatch ──▶ sink ──▶ ledger marks ──▶ commit
//	(tap, own group,  (decoded once,  (one per feed)      (pipeline)   (tap or own group)
//	 catch-up, txn)    refcounted)

// decodedPoll is one poll, decoded once. The feeds' batches point into it;
// the last to release it (unref) unpins its copies and recycles its records
// and itself.
type decodedPoll struct {
	pool  pollPool
	arena []*nfcopy.Copy
	errs  []error // nfcopy.Decode's error per arena entry
	used  int
	parts []polledPart
	refs  atomic.Int32

	// The copies' encoding shared by the sinks of a tap's members that
	// encode alike (share).
	enc    *synthetic.Shared
	encKey any
	good   []*nfcopy.Copy // scratch: the copies that decoded
}

// polledPart is one partition's records in a poll.
type polledPart struct {
	k     tp
	recs  []*kgo.Record
	first int // arena index of recs[0]
}

// pollPool recycles a reader's decoded polls: at most one per batch its
// feeds' pipelines can hold, and one being decoded.
type pollPool chan *decodedPoll

func newPollPool() pollPool { return make(pollPool, 2*pipelineDepth) }

// decode decodes the records of fs into a decodedPoll holding one
// reference; nil when fs held no records. Records that are not NF copies
// (a call-record feed's) are decoded by the feed as it takes them: with
// raw, decode leaves them as they are.
func (pp pollPool) decode(fs kgo.Fetches, raw bool) *decodedPoll {
	var dp *decodedPoll
	select {
	case dp = <-pp:
	default:
		dp = &decodedPoll{pool: pp}
	}
	n := 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		dp.parts = append(dp.parts, polledPart{k: tp{p.Topic, p.Partition}, recs: p.Records, first: n})
		for _, r := range p.Records {
			if n == len(dp.arena) {
				dp.arena = append(dp.arena, new(nfcopy.Copy))
				dp.errs = append(dp.errs, nil)
			}
			if !raw {
				dp.errs[n] = nfcopy.Decode(r.Value, dp.arena[n])
			}
			n++
			dp.used = n
		}
	})
	if len(dp.parts) == 0 {
		pp.put(dp)
		return nil
	}
	dp.refs.Store(1)
	return dp
}

func (pp pollPool) put(dp *decodedPoll) {
	select {
	case pp <- dp:
	default:
	}
}

// each calls fn with every record of dp, its copy and the copy's decode
// error, in poll order (partition by partition).
func (dp *decodedPoll) each(fn func(r *kgo.Record, c *nfcopy.Copy, err error)) {
	for _, pp := range dp.parts {
		for j, r := range pp.recs {
			fn(r, dp.arena[pp.first+j], dp.errs[pp.first+j])
		}
	}
}

// unref drops one reference; the last recycles the poll and its records.
func (dp *decodedPoll) unref() {
	if dp.refs.Add(-1) != 0 {
		return
	}
	releaseDecoded(dp.arena[:dp.used], func(yield func([]*kgo.Record)) {
		for i := range dp.parts {
			yield(dp.parts[i].recs)
		}
	})
	if dp.enc != nil {
		dp.enc.Reset() // after unpin: no copy points into it now
	}
	clear(dp.errs[:dp.used])
	dp.used = 0
	clear(dp.parts)
	dp.parts = dp.parts[:0]
	dp.pool.put(dp)
}

// take puts into b the copies of dp that f has not had yet, of the
// partitions its ledger holds, and that pass its directions and filter,
// then follows and sequences them; false when it took nothing to mark (b
// holds no reference to dp then).
func (f *feed) take(ctx context.Context, dp *decodedPoll, b *pollBatch) bool {
	b.reset()
	var wm *watermarks // a correlating stage's, which reads watermarks among the copies
	if xs := f.xdrStage(); xs != nil {
		wm = xs.wm
	}
	for i := range dp.parts {
		pp := &dp.parts[i]
		k, recs := pp.k, pp.recs
		next, owned := f.led.next(k)
		if !owned {
			// Not (yet) positioned in it: a rewind comes first on a tap;
			// a revoked partition's records are left to its new owner.
			continue
		}
		j := 0
		if next >= 0 {
			j, _ = slices.BinarySearchFunc(recs, next, func(r *kgo.Record, o int64) int { return cmp.Compare(r.Offset, o) })
		}
		if j == len(recs) {
			continue // handed already: a poll fetched before the reader moved on
		}
		last := recs[len(recs)-1]
		h := f.led.hand(k, recs[j].Offset, last.Offset+1)
		if !h.owned {
			continue
		}
		f.checkGap(ctx, k, h, recs[j].Offset)
		for ; j < len(recs); j++ {
			r, c := recs[j], dp.arena[pp.first+j]
			if wm != nil && wm.skip(k, r) {
				continue
			}
			if f.calls {
				f.admitCall(b, r, c, r.Offset <= h.high)
				continue
			}
			f.admit(b, r, c, dp.errs[pp.first+j], r.Offset <= h.high)
		}
		b.mark(last, h.epoch)
	}
	if len(b.marks) == 0 {
		return false
	}
	f.followHeld(b)
	f.sequence(b)
	b.shared = dp
	dp.refs.Add(1)
	return true
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
