package director

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/filter"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/filesink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// ExportQuery selects copies retained in the source topics for a one-shot
// export.
type ExportQuery struct {
	Sources []string  // NF types (topics); empty = all
	Filter  string    // copy filter expression; empty = all
	Since   time.Time // first Kafka record timestamp included; zero = the log start
	Until   time.Time // first timestamp excluded; zero = now
	Format  string    // pcap or jsonl (default)
	// Transactions, when not nil, keeps only the copies of these
	// correlation ids; in a pcap each goes on flows of its own, its
	// client port 10000 plus its number here (the pcap of a search).
	Transactions map[string]int
}

// transactionPortBase is the client port of a pcap's transaction 0.
const transactionPortBase = 10000

// NotRetainedError says the requested range begins before what Kafka still
// retains in some partition: copies of the range may have been deleted.
type NotRetainedError struct {
	Topic     string
	Partition int32
	Oldest    time.Time // timestamp of the oldest retained copy
}

func (e *NotRetainedError) Error() string {
	return fmt.Sprintf("since is before the oldest retained copy of %s[%d] (%s): part of the range was deleted by retention",
		e.Topic, e.Partition, e.Oldest.UTC().Format(time.RFC3339Nano))
}

// ExportStats is what an export wrote.
type ExportStats struct {
	Read, Matched, Invalid int64
}

// exportBatch is how many copies are encoded per write.
const exportBatch = 500

// Export reads the copies of q's range back from Kafka retention with a
// fresh consumer (no group, nothing committed), filters them and writes them
// to w as a pcap of the synthetic stream or as JSON lines, in partition order
// (not merged by time across partitions). Nothing is written before the
// range is checked, so an error without output is a *FieldError (bad query)
// or a *NotRetainedError; w sees its first Write only once copies follow.
func (m *Manager) Export(ctx context.Context, q ExportQuery, w io.Writer) (ExportStats, error) {
	var st ExportStats
	flt, err := m.checkExport(&q)
	if err != nil {
		return st, err
	}
	ranges, err := m.exportRanges(ctx, q)
	if err != nil {
		return st, err
	}
	out := newExportWriter(q, w)
	if len(ranges) > 0 {
		if err := m.exportRead(ctx, q, flt, ranges, out, &st); err != nil {
			return st, err
		}
	}
	return st, out.finish()
}

// checkExport checks q, filling in its defaults, and compiles its filter.
func (m *Manager) checkExport(q *ExportQuery) (*filter.Filter, error) {
	switch q.Format {
	case "":
		q.Format = filesink.FormatJSONL
	case filesink.FormatJSONL, filesink.FormatPCAP:
	default:
		return nil, &FieldError{Field: "format", Msg: fmt.Sprintf("%q: want pcap or jsonl", q.Format)}
	}
	if len(q.Sources) == 0 {
		q.Sources = m.sourceNames
	}
	for i, s := range q.Sources {
		if !m.sources[s] {
			return nil, &FieldError{Field: "sources[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf("%q is not a known NF type (topics: %v)", s, m.sourceNames)}
		}
	}
	var flt *filter.Filter
	if q.Filter != "" {
		var err error
		if flt, _, _, err = compileFilter(&FeedSpec{Filter: q.Filter}, false); err != nil {
			return nil, err
		}
	}
	if q.Until.IsZero() {
		q.Until = time.Now()
	}
	if !q.Since.IsZero() && !q.Since.Before(q.Until) {
		return nil, &FieldError{Field: "since", Msg: "must be before until"}
	}
	return flt, nil
}

// offsetRange is the offsets [from, to) of a partition an export reads.
type offsetRange struct{ from, to int64 }

// exportRanges finds the offsets of q's range in each partition of its
// sources. A partition whose log start moved (retention deleted copies)
// and whose oldest retained copy is younger than since may have lost
// copies of the range: that is a *NotRetainedError, rather than a silently
// shortened export.
func (m *Manager) exportRanges(ctx context.Context, q ExportQuery) (map[string]map[int32]offsetRange, error) {
	starts, err := m.adm.ListStartOffsets(ctx, q.Sources...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("export: list start offsets: %w", err)
	}
	from := starts
	if !q.Since.IsZero() {
		if from, err = m.adm.ListOffsetsAfterMilli(ctx, q.Since.UnixMilli(), q.Sources...); err == nil {
			err = from.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("export: list offsets at since: %w", err)
		}
	}
	to, err := m.adm.ListOffsetsAfterMilli(ctx, q.Until.UnixMilli(), q.Sources...)
	if err == nil {
		err = to.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("export: list offsets at until: %w", err)
	}
	ranges := map[string]map[int32]offsetRange{}
	var nre *NotRetainedError
	from.Each(func(o kadm.ListedOffset) {
		s, ok := starts.Lookup(o.Topic, o.Partition)
		if ok && !q.Since.IsZero() && s.Offset > 0 && o.Offset == s.Offset && o.Timestamp > q.Since.UnixMilli() && nre == nil {
			nre = &NotRetainedError{Topic: o.Topic, Partition: o.Partition, Oldest: time.UnixMilli(o.Timestamp)}
		}
		end, ok := to.Lookup(o.Topic, o.Partition)
		if !ok || end.Offset <= o.Offset {
			return
		}
		if ranges[o.Topic] == nil {
			ranges[o.Topic] = map[int32]offsetRange{}
		}
		ranges[o.Topic][o.Partition] = offsetRange{o.Offset, end.Offset}
	})
	if nre != nil {
		return nil, nre
	}
	return ranges, nil
}

// newExportWriter is the writer of q's format: a pcap of the synthetic
// stream (with the pcap of a search's transactions each on flows of its
// own), or JSON lines.
func newExportWriter(q ExportQuery, w io.Writer) exportWriter {
	if q.Format != filesink.FormatPCAP {
		return &jsonlOut{w: w}
	}
	var opts synthetic.EncoderOptions
	if q.Transactions != nil {
		opts.ClientPort = func(c *nfcopy.Copy) uint16 {
			if n, ok := q.Transactions[c.CorrelationID]; ok && n < 65535-transactionPortBase {
				return uint16(transactionPortBase + n)
			}
			return 0
		}
	}
	return &pcapOut{w: synthetic.NewWriter(w, opts)}
}

// exportRead reads ranges with a consumer of its own and writes the copies
// that pass flt (and q's transactions) to out, in batches.
func (m *Manager) exportRead(ctx context.Context, q ExportQuery, flt *filter.Filter, ranges map[string]map[int32]offsetRange,
	out exportWriter, st *ExportStats) error {
	parts := map[string]map[int32]kgo.Offset{}
	left := 0
	for t, ps := range ranges {
		parts[t] = map[int32]kgo.Offset{}
		for p, r := range ps {
			parts[t][p] = kgo.NewOffset().At(r.from)
			left++
		}
	}
	cl, err := m.cfg.Client.NewClient(kgo.ConsumePartitions(parts), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return fmt.Errorf("export: kafka client: %w", err)
	}
	defer cl.Close()

	arena := make([]nfcopy.Copy, exportBatch)
	batch := make([]*nfcopy.Copy, 0, exportBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := out.write(batch)
		batch = batch[:0]
		return err
	}
	for left > 0 {
		fs := cl.PollRecords(ctx, exportBatch)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("export: fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var werr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			r, ok := ranges[fp.Topic][fp.Partition]
			if !ok {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset >= r.to || werr != nil {
					break
				}
				st.Read++
				c := &arena[len(batch)]
				if err := nfcopy.Decode(rec.Value, c); err != nil {
					st.Invalid++
					continue
				}
				if flt != nil && !flt.Match(c) {
					continue
				}
				if q.Transactions != nil {
					if _, ok := q.Transactions[c.CorrelationID]; !ok {
						continue
					}
				}
				st.Matched++
				batch = append(batch, c)
				if len(batch) == exportBatch {
					werr = flush()
				}
			}
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset+1 >= r.to {
				delete(ranges[fp.Topic], fp.Partition)
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
				left--
			}
		})
		if werr == nil {
			werr = flush() // the arena is reused by the next poll
		}
		if werr != nil {
			return werr
		}
	}
	return nil
}

type exportWriter interface {
	write(batch []*nfcopy.Copy) error
	finish() error
}

type pcapOut struct {
	w     *synthetic.Writer
	wrote bool
}

func (p *pcapOut) write(batch []*nfcopy.Copy) error {
	p.wrote = true
	return p.w.WriteBatch(batch)
}

// finish writes at least the global header, so an empty export is still a
// valid (empty) pcap file.
func (p *pcapOut) finish() error {
	if p.wrote {
		return nil
	}
	return p.w.WriteBatch(nil)
}

type jsonlOut struct {
	w   io.Writer
	buf []byte
}

func (j *jsonlOut) write(batch []*nfcopy.Copy) error {
	b := j.buf[:0]
	for _, c := range batch {
		b = appendJSONLine(b, c.Raw)
	}
	j.buf = b
	_, err := j.w.Write(b)
	return err
}

func (j *jsonlOut) finish() error { return nil }

// appendJSONLine appends raw as one line: copies arrive as single-line JSON
// from most producers; others are flattened (JSON allows newlines only as
// whitespace, so spaces keep it equal).
func appendJSONLine(dst, raw []byte) []byte {
	if slices.Contains(raw, '\n') {
		for _, b := range raw {
			if b == '\n' || b == '\r' {
				b = ' '
			}
			dst = append(dst, b)
		}
		return append(dst, '\n')
	}
	return append(append(dst, raw...), '\n')
}

// IsNotRetained reports whether err is a *NotRetainedError.
func IsNotRetained(err error) bool {
	var e *NotRetainedError
	return errors.As(err, &e)
}
