package director

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/datadirector/filter"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// feedFilter is a feed's compiled filter and its counters. A nil
// *feedFilter passes everything.
type feedFilter struct {
	copies  *filter.Filter       // copy feeds
	records *filter.RecordFilter // xdr feeds
	calls   *filter.CallFilter   // feeds of call records
	// follow (spec Transactions) passes the copies of the transactions
	// of the copies the filter passed: a response without the
	// subscriber's identity belongs to the trace of its request.
	follow  *txnSet
	orphans *orphans // with follow

	mMatched, mDropped prometheus.Counter
}

// orphans keeps, for a feed with Transactions reading behind live traffic
// (a trace's look-back over a backlog), the copies the filter did not pass
// and no copy of their poll followed, for a later poll that reads the copy
// starting their transaction: a backlog spread over partitions is read
// unevenly, so a response can come polls before its request. Live, polls
// carry every partition's newest copies and the poll's own hold suffices,
// so nothing is kept. A copy is kept as a copy of its raw record, decoded
// again only if its transaction starts: most are evicted unused. Bounded
// in number and in how long a copy is kept.
type orphans struct {
	mu    sync.Mutex
	byID  map[string][][]byte // raw records
	queue []orphan            // in the order kept, for eviction
}

type orphan struct {
	id   string
	kept int64 // unix ns
}

const (
	orphanMax    = 4096             // copies kept at most
	orphanAge    = 10 * time.Second // kept at most this long
	orphanBehind = time.Second      // a copy older than this (its timestamp) is read behind live traffic
)

func newOrphans() *orphans { return &orphans{byID: map[string][][]byte{}} }

// keep keeps c's raw record if c was read behind live traffic; false if
// not kept. evicted is how many kept copies it dropped to make room.
func (o *orphans) keep(c *nfcopy.Copy, now int64) (kept bool, evicted int) {
	if o == nil || c.Timestamp == 0 || now-c.Timestamp < int64(orphanBehind) {
		return false, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.queue) >= orphanMax {
		evicted += o.dropOldest()
	}
	id := strings.Clone(c.CorrelationID)
	o.byID[id] = append(o.byID[id], slices.Clone(c.Raw))
	o.queue = append(o.queue, orphan{id, now})
	return true, evicted
}

// adopt returns, decoded, and forgets the copies kept of the transactions
// of batch, and drops those kept longer than orphanAge: expired is how
// many.
func (o *orphans) adopt(batch []*nfcopy.Copy, now int64) (adopted []*nfcopy.Copy, expired int) {
	var raws [][]byte
	o.mu.Lock()
	for len(o.queue) > 0 && now-o.queue[0].kept > int64(orphanAge) {
		expired += o.dropOldest()
	}
	if len(o.byID) > 0 {
		for _, c := range batch {
			if rs, ok := o.byID[c.CorrelationID]; ok {
				raws = append(raws, rs...)
				delete(o.byID, c.CorrelationID) // its queue entries find nothing when they expire
			}
		}
	}
	o.mu.Unlock()
	for _, raw := range raws {
		c := new(nfcopy.Copy)
		if nfcopy.Decode(raw, c) == nil { // it was decoded once already
			adopted = append(adopted, c)
		}
	}
	return adopted, expired
}

// dropOldest forgets the oldest kept copy (none if its transaction was
// taken) and returns how many copies it dropped; o.mu is held.
func (o *orphans) dropOldest() int {
	id := o.queue[0].id
	o.queue = o.queue[1:]
	cs := o.byID[id]
	if len(cs) == 0 {
		return 0
	}
	if len(cs) == 1 {
		delete(o.byID, id)
	} else {
		o.byID[id] = cs[1:]
	}
	return 1
}

// txnSet remembers correlation ids for a while, at most max of them.
type txnSet struct {
	mu   sync.Mutex
	ids  map[string]int64 // correlation id -> expiry, unix ns
	ttl  time.Duration
	max  int
	next int64 // when to sweep the expired
}

func newTxnSet() *txnSet {
	return &txnSet{ids: map[string]int64{}, ttl: 5 * time.Minute, max: 100_000}
}

func (s *txnSet) add(id string, now int64) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) >= s.max || now >= s.next {
		for k, exp := range s.ids {
			if exp <= now {
				delete(s.ids, k)
			}
		}
		if len(s.ids) >= s.max {
			clear(s.ids) // a burst past the bound: start over
		}
		s.next = now + int64(s.ttl)
	}
	s.ids[strings.Clone(id)] = now + int64(s.ttl)
}

func (s *txnSet) has(id string, now int64) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	exp, ok := s.ids[id]
	s.mu.Unlock()
	return ok && exp > now
}

// compileFilter compiles spec's filter for its feed: records for an xdr
// feed, call records for a feed of the calls topic, copies otherwise.
// Errors are *FieldError on "filter" with the expression's line and column.
func compileFilter(spec *FeedSpec, calls bool) (*filter.Filter, *filter.RecordFilter, *filter.CallFilter, error) {
	if spec.Filter == "" {
		return nil, nil, nil, nil
	}
	var (
		cf    *filter.Filter
		rf    *filter.RecordFilter
		callf *filter.CallFilter
		err   error
	)
	switch {
	case calls:
		callf, err = filter.CompileCall(spec.Filter)
	case spec.Type == TypeXDR:
		rf, err = filter.CompileRecord(spec.Filter)
	default:
		cf, err = filter.Compile(spec.Filter)
	}
	if err != nil {
		var fe *filter.Error
		if errors.As(err, &fe) {
			if fe.Line > 0 {
				return nil, nil, nil, &FieldError{Field: "filter", Msg: fmt.Sprintf("line %d, column %d: %s", fe.Line, fe.Column, fe.Msg)}
			}
			return nil, nil, nil, &FieldError{Field: "filter", Msg: fe.Msg}
		}
		return nil, nil, nil, &FieldError{Field: "filter", Msg: err.Error()}
	}
	return cf, rf, callf, nil
}

// initFilter compiles the feed's filter (the spec was or will be
// validated; an invalid filter leaves the feed in error before it runs, so
// nil here is harmless).
func (f *feed) initFilter() {
	cf, rf, callf, err := compileFilter(&f.spec.FeedSpec, f.calls)
	if err != nil || (cf == nil && rf == nil && callf == nil) {
		return
	}
	l := prometheus.Labels{"feed": f.spec.Name}
	f.filt = &feedFilter{copies: cf, records: rf, calls: callf,
		mMatched: f.m.m.filterMatched.With(l), mDropped: f.m.m.filterDropped.With(l)}
	if f.spec.Transactions && cf != nil {
		f.filt.follow, f.filt.orphans = newTxnSet(), newOrphans()
	}
}

// passCall applies a call-record feed's filter to r, counting.
func (f *feed) passCall(r *callrecord.Record) bool {
	if f.filt == nil || f.filt.calls == nil {
		return true
	}
	return f.countFiltered(f.filt.calls.Match(r))
}

// pass applies a copy feed's filter to c, counting. xdr feeds filter
// records, not copies, so their copies all pass here. With Transactions, a
// copy the filter does not pass but that has a correlation id not seen yet
// is held, uncounted: a copy read after it in the same poll (its request,
// from another partition or written after its response) may still start
// its transaction, which followHeld settles once the poll is decoded.
func (f *feed) pass(c *nfcopy.Copy) (ok, held bool) {
	if f.filt == nil || f.filt.copies == nil {
		return true, false
	}
	if fw := f.filt.follow; fw != nil {
		now := time.Now().UnixNano()
		if f.filt.copies.Match(c) {
			fw.add(c.CorrelationID, now)
			return f.countFiltered(true), false
		}
		if fw.has(c.CorrelationID, now) {
			return f.countFiltered(true), false
		}
		if c.CorrelationID != "" {
			return false, true
		}
		return f.countFiltered(false), false
	}
	return f.countFiltered(f.filt.copies.Match(c)), false
}

// followHeld adds to b's batch the copies pass held whose transaction a
// copy of the same poll started, after that copy, and the orphans an
// earlier poll kept of the transactions the batch's copies are of; the
// rest are kept as orphans when read behind live traffic, else filtered
// out.
func (f *feed) followHeld(b *pollBatch) {
	o := f.filt.orphansOf()
	if len(b.held) == 0 && o == nil {
		return
	}
	now := time.Now().UnixNano()
	dropped := 0
	if o != nil {
		adopted, expired := o.adopt(b.batch, now)
		b.batch = append(b.batch, adopted...)
		for range adopted {
			f.countFiltered(true)
		}
		dropped += expired
	}
	for _, c := range b.held {
		if f.filt.follow.has(c.CorrelationID, now) {
			f.countFiltered(true)
			b.batch = append(b.batch, c)
			continue
		}
		kept, evicted := o.keep(c, now)
		dropped += evicted
		if !kept {
			dropped++
		}
	}
	for range dropped {
		f.countFiltered(false)
	}
	clear(b.held)
	b.held = b.held[:0]
}

// orphansOf is ff's orphans; nil without Transactions (or a filter).
func (ff *feedFilter) orphansOf() *orphans {
	if ff == nil {
		return nil
	}
	return ff.orphans
}

// passRecord applies an xdr feed's filter to r, counting.
func (f *feed) passRecord(r *xdr.Record) bool {
	if f.filt == nil || f.filt.records == nil {
		return true
	}
	return f.countFiltered(f.filt.records.Match(r))
}

// countFiltered counts one filter verdict and returns it.
func (f *feed) countFiltered(matched bool) bool {
	if matched {
		f.matched.Add(1)
		f.filt.mMatched.Inc()
	} else {
		f.filteredOut.Add(1)
		f.filt.mDropped.Inc()
	}
	return matched
}

// filterStatus adds the filter and record counters to st.
func (f *feed) filterStatus(st *FeedStatus) {
	st.Matched, st.FilteredOut = f.matched.Load(), f.filteredOut.Load()
	st.Records = f.records.Load()
	if xs := f.xdrStage(); xs != nil {
		st.Pending = int64(xs.x.Pending())
	}
}
