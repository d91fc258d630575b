// Package xdrstore keeps the transaction records (xDRs) the xdr feeds make,
// in compressed segments in the data directory, with retention by age and
// size, and searches them newest first by subscriber (SUPI, GPSI),
// correlation id, NF type, service, status, cause, result and time.
//
// A segment is a file of up to SegmentRecords records: one header line
// (JSON: count, time range, codec, and a Bloom filter of the SUPIs, GPSIs
// and correlation ids it holds) and then the records as JSON lines
// compressed with S2 or zstd (Config.Codec; both are read). The headers
// stay in memory, so a search by subscriber opens only the segments whose
// filter may hold them.
package xdrstore

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// Config configures a Store. Zero fields take the defaults.
type Config struct {
	Dir            string
	MaxAge         time.Duration // default 7 days
	MaxBytes       int64         // default 10 GiB
	SegmentRecords int           // default 4096
	FlushInterval  time.Duration // default 2 s
	Codec          string        // new segments' compression: "s2" (default) or "zstd"; both are read
	Queue          int           // records waiting to be written; default 100,000 (past it: dropped, counted)
	Registerer     prometheus.Registerer
	Logger         *slog.Logger
}

// Query selects records; zero fields do not filter. Newest first.
type Query struct {
	SUPI, GPSI, CorrelationID string
	NFType, Service, Cause    string
	Result                    string
	Status                    int
	Since, Until              time.Time
	Limit                     int // default 100, at most 1000
}

// Store keeps and searches records.
type Store struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex // the pending queue
	pending []entry
	spare   []entry // the last batch written, emptied: the next queue
	kick    chan struct{}

	body, out []byte // write's buffers, reused (only Run writes)

	smu  sync.RWMutex // the segments
	segs []*segment   // oldest first
	seq  int

	written, dropped prometheus.Counter
}

// segment is a segment's header, as kept in memory.
type segment struct {
	Count  int    `json:"count"`
	MinEnd int64  `json:"min_end"` // record end times, ns
	MaxEnd int64  `json:"max_end"`
	Bloom  []byte `json:"bloom"`
	Codec  string `json:"codec,omitempty"` // "s2" or "zstd"; "": zstd (segments written before the field)
	path   string
	size   int64
}

const bloomK = 4

// Open opens (creating) the store's directory and reads its segments'
// headers.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("xdrstore: no directory")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 7 * 24 * time.Hour
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 10 << 30
	}
	if cfg.SegmentRecords <= 0 {
		cfg.SegmentRecords = 4096
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 2 * time.Second
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 100_000
	}
	switch cfg.Codec {
	case "":
		cfg.Codec = codecS2
	case codecS2, codecZstd:
	default:
		return nil, fmt.Errorf("xdrstore: codec %q: want s2 or zstd", cfg.Codec)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("xdrstore: %w", err)
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With("component", "xdrstore"), kick: make(chan struct{}, 1),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_xdrstore_records_written_total",
			Help: "Transaction records written to the xDR store."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_xdrstore_records_dropped_total",
			Help: "Transaction records not stored: the write queue was full or a write failed."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.written, s.dropped} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("xdrstore: register metrics: %w", err)
			}
		}
	}
	names, err := filepath.Glob(filepath.Join(cfg.Dir, "*.xdrs"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		sg, err := readHeader(n)
		if err != nil {
			s.log.Warn("xdr segment unreadable; left out", "file", n, "err", err)
			continue
		}
		s.segs = append(s.segs, sg)
		s.seq++
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return cmp.Compare(a.MaxEnd, b.MaxEnd) })
	return s, nil
}

// entry is a queued record: what its segment's header needs of it, and its
// JSON line.
type entry struct {
	end  int64
	keys [3]string // SUPI, GPSI, correlation id ("": none)
	raw  []byte
}

func newEntry(r *xdr.Record, raw []byte) entry {
	return entry{end: r.End, keys: [3]string{r.SUPI, r.GPSI, r.CorrelationID}, raw: raw}
}

// Append queues records to be written, with their JSON when the caller
// encoded them already (raws[i] for recs[i]; nil: Append encodes them). It
// never blocks: a full queue drops and counts.
func (s *Store) Append(recs []xdr.Record, raws [][]byte) {
	var dropped int
	s.mu.Lock()
	n := min(s.cfg.Queue-len(s.pending), len(recs))
	for i := range recs[:max(n, 0)] {
		var raw []byte
		if raws != nil {
			raw = raws[i]
		}
		if raw == nil {
			var err error
			if raw, err = json.Marshal(&recs[i]); err != nil {
				dropped++
				continue
			}
		}
		s.pending = append(s.pending, newEntry(&recs[i], raw))
	}
	full := len(s.pending) >= s.cfg.SegmentRecords
	s.mu.Unlock()
	if dropped += len(recs) - max(n, 0); dropped > 0 {
		s.dropped.Add(float64(dropped))
	}
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// Run writes segments (when SegmentRecords are queued or every
// FlushInterval) and applies retention, until ctx ends; then it writes
// what is queued.
func (s *Store) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush(true)
			return
		case <-s.kick:
			s.flush(false)
		case <-t.C:
			s.flush(true)
			s.prune(time.Now())
		}
	}
}

// flush writes full segments, and with all the rest as a last one.
func (s *Store) flush(all bool) {
	for {
		s.mu.Lock()
		n := min(len(s.pending), s.cfg.SegmentRecords)
		if n == 0 || (!all && n < s.cfg.SegmentRecords) {
			s.mu.Unlock()
			return
		}
		var batch []entry
		if n == len(s.pending) {
			batch, s.pending = s.pending, s.spare[:0]
			s.spare = nil
		} else {
			batch = slices.Clone(s.pending[:n])
			s.pending = append(s.pending[:0], s.pending[n:]...)
		}
		s.mu.Unlock()
		if err := s.write(batch); err != nil {
			s.dropped.Add(float64(len(batch)))
			s.log.Error("xdr store: write a segment", "records", len(batch), "err", err)
		} else {
			s.written.Add(float64(len(batch)))
		}
		clear(batch) // the records' JSON is on disk: let it go
		s.mu.Lock()
		if cap(batch) <= 2*s.cfg.SegmentRecords {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
	}
}

// The segments' codecs: S2 (klauspost/compress/s2) takes about half zstd's
// CPU per record in an xdr feed, zstd (SpeedFastest) fewer bytes on disk
// (BENCHMARKS.md).
const (
	codecS2   = "s2"
	codecZstd = "zstd"
)

var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		return e
	})
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
		return d
	})
)

func bloomBits(n int) int { return max(64, n*3*10) } // ~1 % false positives at 3 keys a record

// bloomPositions are key's bits among m: double hashing of its 64-bit
// FNV-1a hash.
func bloomPositions(key string, m int) [bloomK]int {
	v := uint64(14695981039346656037) // FNV-1a, as hash/fnv's New64a, without its allocations
	for i := 0; i < len(key); i++ {
		v ^= uint64(key[i])
		v *= 1099511628211
	}
	a, b := uint32(v), uint32(v>>32)
	var out [bloomK]int
	for i := range out {
		out[i] = int((a + uint32(i)*b) % uint32(m))
	}
	return out
}

func (sg *segment) mayHold(key string) bool {
	m := len(sg.Bloom) * 8
	for _, p := range bloomPositions(key, m) {
		if sg.Bloom[p/8]&(1<<(p%8)) == 0 {
			return false
		}
	}
	return true
}

// write makes one segment of es.
func (s *Store) write(es []entry) error {
	sg := &segment{Count: len(es), MinEnd: es[0].end, MaxEnd: es[0].end, Codec: s.cfg.Codec}
	m := bloomBits(len(es))
	sg.Bloom = make([]byte, (m+7)/8)
	m = len(sg.Bloom) * 8
	size := 0
	for i := range es {
		size += len(es[i].raw) + 1
	}
	body := s.body[:0]
	if cap(body) < size {
		body = make([]byte, 0, size+size/8)
	}
	for i := range es {
		e := &es[i]
		sg.MinEnd, sg.MaxEnd = min(sg.MinEnd, e.end), max(sg.MaxEnd, e.end)
		for _, k := range e.keys {
			if k == "" {
				continue
			}
			for _, p := range bloomPositions(k, m) {
				sg.Bloom[p/8] |= 1 << (p % 8)
			}
		}
		body = append(append(body, e.raw...), '\n')
	}
	s.body = body
	hdr, err := json.Marshal(sg)
	if err != nil {
		return err
	}
	out := append(append(s.out[:0], hdr...), '\n')
	if sg.Codec == codecZstd {
		out = encoder().EncodeAll(body, out)
	} else {
		out = slices.Grow(out, s2.MaxEncodedLen(len(body)))
		n := len(out)
		out = out[:n+len(s2.Encode(out[n:cap(out)], body))]
	}
	s.out = out
	s.smu.Lock()
	s.seq++
	seq := s.seq
	s.smu.Unlock()
	name := filepath.Join(s.cfg.Dir, fmt.Sprintf("%020d-%06d.xdrs", sg.MaxEnd, seq))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, out, 0o640); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	sg.path, sg.size = name, int64(len(out))
	s.smu.Lock()
	i, _ := slices.BinarySearchFunc(s.segs, sg, func(a, b *segment) int { return cmp.Compare(a.MaxEnd, b.MaxEnd) })
	s.segs = slices.Insert(s.segs, i, sg)
	s.smu.Unlock()
	return nil
}

func readHeader(path string) (*segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	sg := &segment{path: path}
	if err := json.Unmarshal(line, sg); err != nil || len(sg.Bloom) == 0 {
		return nil, fmt.Errorf("header: %v", err)
	}
	if st, err := f.Stat(); err == nil {
		sg.size = st.Size()
	}
	return sg, nil
}

// lines reads a segment's records, one JSON line each.
func (sg *segment) lines() ([][]byte, error) {
	b, err := os.ReadFile(sg.path)
	if err != nil {
		return nil, err
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, errors.New("no header")
	}
	var body []byte
	switch sg.Codec {
	case codecS2:
		body, err = s2.Decode(nil, b[i+1:])
	case codecZstd, "":
		body, err = decoder().DecodeAll(b[i+1:], nil)
	default:
		err = fmt.Errorf("unknown codec %q", sg.Codec)
	}
	if err != nil {
		return nil, err
	}
	return bytes.Split(bytes.TrimRight(body, "\n"), []byte{'\n'}), nil
}

// Search returns the records matching q, newest segment first and, within
// a segment, newest first; at most q.Limit.
func (s *Store) Search(ctx context.Context, q Query) ([]json.RawMessage, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, 1000)
	key := q.SUPI
	if key == "" {
		key = q.GPSI
	}
	if key == "" {
		key = q.CorrelationID
	}
	keyBytes := []byte(key)
	s.smu.RLock()
	segs := slices.Clone(s.segs)
	s.smu.RUnlock()
	var out []json.RawMessage
	for i := len(segs) - 1; i >= 0 && len(out) < q.Limit; i-- {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		sg := segs[i]
		if !q.Since.IsZero() && sg.MaxEnd < q.Since.UnixNano() || !q.Until.IsZero() && sg.MinEnd > q.Until.UnixNano() {
			continue
		}
		if key != "" && !sg.mayHold(key) {
			continue
		}
		lines, err := sg.lines()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // pruned meanwhile
			}
			return out, fmt.Errorf("xdr segment %s: %w", filepath.Base(sg.path), err)
		}
		for j := len(lines) - 1; j >= 0 && len(out) < q.Limit; j-- {
			l := lines[j]
			if key != "" && !bytes.Contains(l, keyBytes) {
				continue
			}
			var r xdr.Record
			if err := json.Unmarshal(l, &r); err != nil || !q.matches(&r) {
				continue
			}
			out = append(out, json.RawMessage(l))
		}
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return out, nil
}

func (q *Query) matches(r *xdr.Record) bool {
	nf := ""
	if len(r.HopLatencies) > 0 {
		nf = r.HopLatencies[0].NFType
	} else if len(r.Hops) > 0 {
		nf = r.Hops[0].NFType
	}
	switch {
	case q.SUPI != "" && r.SUPI != q.SUPI,
		q.GPSI != "" && r.GPSI != q.GPSI,
		q.CorrelationID != "" && r.CorrelationID != q.CorrelationID,
		q.NFType != "" && !strings.EqualFold(nf, q.NFType),
		q.Service != "" && r.Service != q.Service,
		q.Cause != "" && r.Cause != q.Cause,
		q.Result != "" && r.Result != q.Result,
		q.Status != 0 && r.Status != q.Status,
		!q.Since.IsZero() && r.End < q.Since.UnixNano(),
		!q.Until.IsZero() && r.End > q.Until.UnixNano():
		return false
	}
	return true
}

// prune deletes the oldest segments past MaxAge or past MaxBytes in all.
func (s *Store) prune(now time.Time) {
	s.smu.Lock()
	var total int64
	for _, sg := range s.segs {
		total += sg.size
	}
	cut := now.Add(-s.cfg.MaxAge).UnixNano()
	n := 0
	for n < len(s.segs) && (s.segs[n].MaxEnd < cut || total > s.cfg.MaxBytes) {
		total -= s.segs[n].size
		n++
	}
	gone := slices.Clone(s.segs[:n])
	s.segs = append(s.segs[:0], s.segs[n:]...)
	s.smu.Unlock()
	for _, sg := range gone {
		if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("xdr store: remove a segment", "file", sg.path, "err", err)
		}
	}
}
