package director

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/filter"
	"github.com/signalbox/signalbox/internal/nfcopy"
	"github.com/signalbox/signalbox/internal/sink/filesink"
	"github.com/signalbox/signalbox/internal/xdr"
)

// extMetrics are the series of filters (every feed type); xdr feeds add the
// correlator's own series, labelled with the feed.
type extMetrics struct {
	matched *prometheus.CounterVec
	dropped *prometheus.CounterVec
	records *prometheus.CounterVec
}

func newExtMetrics(reg prometheus.Registerer) (*extMetrics, error) {
	feed := []string{"feed"}
	e := &extMetrics{
		matched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_filter_matched_total",
			Help: "Copies (xdr feeds: records) the feed's filter passed."}, feed),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_filter_dropped_total",
			Help: "Copies (xdr feeds: records) the feed's filter dropped; their offsets are committed all the same."}, feed),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_records_delivered_total",
			Help: "Transaction records an xdr feed's output confirmed."}, feed),
	}
	if reg == nil {
		return e, nil
	}
	for _, c := range []prometheus.Collector{e.matched, e.dropped, e.records} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("director metrics: %w", err)
		}
	}
	return e, nil
}

func (e *extMetrics) forget(feed string) {
	e.matched.DeleteLabelValues(feed)
	e.dropped.DeleteLabelValues(feed)
	e.records.DeleteLabelValues(feed)
}

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

// initExt sets up what a feed needs beyond the base loop: its filter (the
// spec was or will be validated; an invalid filter leaves the feed in error
// before it runs, so nil here is harmless).
func (f *feed) initExt() {
	cf, rf, err := compileFilter(&f.spec)
	if err != nil || (cf == nil && rf == nil) {
		return
	}
	l := prometheus.Labels{"feed": f.spec.Name}
	f.filt = &feedFilter{copies: cf, records: rf,
		mMatched: f.m.ext.matched.With(l), mDropped: f.m.ext.dropped.With(l)}
}

// pass applies a copy feed's filter to c, counting. xdr feeds filter
// records, not copies, so their copies all pass here.
func (f *feed) pass(c *nfcopy.Copy) bool {
	if f.filt == nil || f.filt.copies == nil {
		return true
	}
	if f.filt.copies.Match(c) {
		f.matched.Add(1)
		f.filt.mMatched.Inc()
		return true
	}
	f.filteredOut.Add(1)
	f.filt.mDropped.Inc()
	return false
}

// passRecord applies an xdr feed's filter to r, counting.
func (f *feed) passRecord(r *xdr.Record) bool {
	if f.filt == nil || f.filt.records == nil {
		return true
	}
	if f.filt.records.Match(r) {
		f.matched.Add(1)
		f.filt.mMatched.Inc()
		return true
	}
	f.filteredOut.Add(1)
	f.filt.mDropped.Inc()
	return false
}

// extStatus adds the filter and record counters to st.
func (f *feed) extStatus(st *FeedStatus) {
	st.Matched, st.FilteredOut = f.matched.Load(), f.filteredOut.Load()
	st.Records = f.records.Load()
	if xs := f.xdrSink(); xs != nil {
		st.Pending = int64(xs.x.Pending())
	}
}

// validateExt checks what the base Validate does not: the filter, and the
// xdr and file feed types.
func (m *Manager) validateExt(spec *FeedSpec) error {
	if _, _, err := compileFilter(spec); err != nil {
		return err
	}
	switch spec.Type {
	case TypeFile:
		if spec.File == nil {
			return &FieldError{Field: "file", Msg: `required for a file feed: {"dir":...,"format":"pcap|jsonl"}`}
		}
		if err := validateFile(spec.File, false); err != nil {
			return err
		}
	case TypeXDR:
		outs := 0
		for _, set := range []bool{spec.Topic != "", spec.URL != "", spec.File != nil} {
			if set {
				outs++
			}
		}
		if outs != 1 {
			return &FieldError{Field: "topic", Msg: "an xdr feed needs exactly one output: topic, url or file"}
		}
		if spec.File != nil {
			if err := validateFile(spec.File, true); err != nil {
				return err
			}
		}
		if spec.Topic != "" {
			if err := broker.ValidateTopicName(spec.Topic); err != nil {
				return &FieldError{Field: "topic", Msg: err.Error()}
			}
			if spec.Kafka == nil && (m.sources[spec.Topic] || spec.Topic == m.cfg.DLQTopic) {
				return &FieldError{Field: "topic", Msg: fmt.Sprintf("%q is a director topic; feeding it would loop", spec.Topic)}
			}
		}
		if spec.URL != "" {
			u, err := url.Parse(spec.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &FieldError{Field: "url", Msg: fmt.Sprintf("%q: want an http:// or https:// URL", spec.URL)}
			}
		}
		if _, err := xdrConfig(spec); err != nil {
			return err
		}
	default:
		if spec.File != nil {
			return &FieldError{Field: "file", Msg: "only file and xdr feeds write files"}
		}
	}
	if spec.XDR != nil && spec.Type != TypeXDR {
		return &FieldError{Field: "xdr", Msg: "only for xdr feeds"}
	}
	return nil
}

func validateFile(fs *FileSpec, records bool) error {
	if fs.Dir == "" {
		return &FieldError{Field: "file.dir", Msg: "required"}
	}
	switch fs.Format {
	case "", filesink.FormatPCAP, filesink.FormatJSONL:
	default:
		return &FieldError{Field: "file.format", Msg: fmt.Sprintf("%q: want pcap or jsonl", fs.Format)}
	}
	if records && fs.Format == filesink.FormatPCAP {
		return &FieldError{Field: "file.format", Msg: "transaction records are written as jsonl"}
	}
	if fs.RotateBytes < 0 {
		return &FieldError{Field: "file.rotate_bytes", Msg: "must not be negative"}
	}
	if fs.RotateSeconds < 0 {
		return &FieldError{Field: "file.rotate_seconds", Msg: "must not be negative"}
	}
	if fs.Keep < 0 {
		return &FieldError{Field: "file.keep", Msg: "must not be negative"}
	}
	return nil
}

// fileFormat is the spec's format with its default: pcap for copies, jsonl
// for records.
func fileFormat(spec *FeedSpec) string {
	if spec.File.Format != "" {
		return spec.File.Format
	}
	if spec.Type == TypeXDR {
		return filesink.FormatJSONL
	}
	return filesink.FormatPCAP
}

// fileSink builds the file target of a file or xdr feed.
func (m *Manager) fileSink(spec *FeedSpec) (Sink, error) {
	fs := spec.File
	return filesink.New(filesink.Config{
		Dir: fs.Dir, Prefix: spec.Name, Format: fileFormat(spec),
		RotateBytes: fs.RotateBytes, RotateInterval: time.Duration(fs.RotateSeconds) * time.Second, Keep: fs.Keep,
		Logger: m.log.With("feed", spec.Name),
	})
}

// extSink builds the sink of the feed types this file adds: a file feed's
// files, an xdr feed's record output (records travel as copies whose Raw is
// the record's JSON and whose correlation id is the key).
func (m *Manager) extSink(spec *FeedSpec) (Sink, error) {
	switch {
	case spec.Type == TypeFile || spec.File != nil:
		return m.fileSink(spec)
	case spec.Topic != "":
		s := *spec
		s.Type = TypeKafka
		return m.defaultSink(&s)
	case spec.URL != "":
		s := *spec
		s.Type = TypeHTTP2
		return m.defaultSink(&s)
	}
	return nil, fmt.Errorf("feed %q: no output", spec.Name)
}
