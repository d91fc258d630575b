package director

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/filter"
	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/xdr"
)

// feedFilter is a feed's compiled filter and its counters. A nil
// *feedFilter passes everything.
type feedFilter struct {
	copies  *filter.Filter       // copy feeds
	records *filter.RecordFilter // xdr feeds

	mMatched, mDropped prometheus.Counter
}

// compileFilter compiles spec's filter for its feed type: records for an
// xdr feed, copies otherwise. Errors are *FieldError on "filter" with the
// expression's line and column.
func compileFilter(spec *FeedSpec) (*filter.Filter, *filter.RecordFilter, error) {
	if spec.Filter == "" {
		return nil, nil, nil
	}
	var (
		cf  *filter.Filter
		rf  *filter.RecordFilter
		err error
	)
	if spec.Type == TypeXDR {
		rf, err = filter.CompileRecord(spec.Filter)
	} else {
		cf, err = filter.Compile(spec.Filter)
	}
	if err != nil {
		var fe *filter.Error
		if errors.As(err, &fe) {
			if fe.Line > 0 {
				return nil, nil, &FieldError{Field: "filter", Msg: fmt.Sprintf("line %d, column %d: %s", fe.Line, fe.Column, fe.Msg)}
			}
			return nil, nil, &FieldError{Field: "filter", Msg: fe.Msg}
		}
		return nil, nil, &FieldError{Field: "filter", Msg: err.Error()}
	}
	return cf, rf, nil
}

// initFilter compiles the feed's filter (the spec was or will be
// validated; an invalid filter leaves the feed in error before it runs, so
// nil here is harmless).
func (f *feed) initFilter() {
	cf, rf, err := compileFilter(&f.spec)
	if err != nil || (cf == nil && rf == nil) {
		return
	}
	l := prometheus.Labels{"feed": f.spec.Name}
	f.filt = &feedFilter{copies: cf, records: rf,
		mMatched: f.m.m.filterMatched.With(l), mDropped: f.m.m.filterDropped.With(l)}
}

// pass applies a copy feed's filter to c, counting. xdr feeds filter
// records, not copies, so their copies all pass here.
func (f *feed) pass(c *nfcopy.Copy) bool {
	if f.filt == nil || f.filt.copies == nil {
		return true
	}
	return f.countFiltered(f.filt.copies.Match(c))
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
	if xs := f.xdrSink(); xs != nil {
		st.Pending = int64(xs.x.Pending())
	}
}
