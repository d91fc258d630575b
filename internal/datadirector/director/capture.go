package director

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/filter"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// CaptureQuery selects the live copies of a capture, with a feed's
// selectors.
type CaptureQuery struct {
	Sources    []string // NF types (topics); empty = all
	Filter     string   // copy filter expression; empty = all
	SUPI, GPSI string   // a subscriber (imsi-…/msisdn-… or the digits); both apply when both are given
	Directions []string // message directions; empty = all
	// Duration ends the capture after it; 0: when the client goes away.
	Duration time.Duration
}

// CaptureStats is what a capture read and wrote.
type CaptureStats struct {
	Copies  int64 // written
	Dropped int64 // matched, but lost: the client read too slowly
	Invalid int64 // undecodable
}

// CaptureBuffer bounds the copies a capture holds for a client that reads
// more slowly than they arrive; beyond it, copies are dropped (counted).
const CaptureBuffer = 16 << 20

// captureWriteTimeout is how long a capture waits on a client that takes
// nothing at all before it ends the capture.
const captureWriteTimeout = 30 * time.Second

// Capture streams to w, as a pcap of the synthetic stream (the encoding of
// a synthetic feed: HTTP/2 or Diameter over TCP, one flow per NF pair), the
// copies of q's sources that arrive from now on, until ctx ends or
// q.Duration has passed. It reads with a consumer of its own (no group,
// nothing committed), so it never slows a feed; copies wait for w in a
// buffer of CaptureBuffer bytes, and a client that reads more slowly than
// they arrive loses those that do not fit (CaptureStats.Dropped,
// signalbox_capture_dropped_total). deadline, if not nil, is told before
// each write how long it may take (an HTTP response's write deadline);
// flush, if not nil, is called after each. A bad query is a *FieldError,
// returned before anything is written.
func (m *Manager) Capture(ctx context.Context, q CaptureQuery, w io.Writer, deadline func(time.Time), flush func()) (CaptureStats, error) {
	var st CaptureStats
	c, err := m.newCapture(q)
	if err != nil {
		return st, err
	}
	cl, err := m.cfg.Client.NewClient(kgo.ConsumeTopics(c.sources...), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return st, fmt.Errorf("capture: kafka client: %w", err)
	}
	defer cl.Close()
	m.m.capturesActive.Inc()
	defer m.m.capturesActive.Dec()
	if q.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.Duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	queue := make(chan captured, 1024)
	go c.read(ctx, cl, queue)
	out := synthetic.NewWriter(w, synthetic.EncoderOptions{})
	write := func(batch []*nfcopy.Copy) error {
		if deadline != nil {
			deadline(time.Now().Add(captureWriteTimeout))
		}
		if err := out.WriteBatch(batch); err != nil {
			return err
		}
		if flush != nil {
			flush()
		}
		return nil
	}
	// The header first: a reader (Wireshark, tshark) starts before the
	// first copy.
	err = write(nil)
	for err == nil {
		b, ok := <-queue
		if !ok {
			break
		}
		c.queued.Add(-b.bytes)
		if err = write(b.copies); err == nil {
			st.Copies += int64(len(b.copies))
			m.m.captureCopies.Add(float64(len(b.copies)))
		}
	}
	cancel()
	for range queue { // the reader ends at ctx: the client closes after it
	}
	st.Dropped, st.Invalid = c.dropped.Load(), c.invalid.Load()
	if err != nil && ctx.Err() == nil {
		return st, fmt.Errorf("capture: %w", err)
	}
	return st, nil
}

// capture is a running capture's reader: what it selects, and what it
// holds for the writer.
type capture struct {
	m       *Manager
	sources []string
	filt    *filter.Filter
	dirs    [8]bool

	buffer           int64        // CaptureBuffer, or the Manager's Config.CaptureBuffer
	queued           atomic.Int64 // raw bytes waiting for the writer
	dropped, invalid atomic.Int64
}

var (
	captureSUPI = regexp.MustCompile(`^(imsi-)?[0-9]{5,15}$`)
	captureGPSI = regexp.MustCompile(`^(msisdn-)?\+?[0-9]{5,15}$`)
)

// newCapture checks q and compiles its selectors.
func (m *Manager) newCapture(q CaptureQuery) (*capture, error) {
	c := &capture{m: m, sources: q.Sources, buffer: m.cfg.CaptureBuffer}
	if c.buffer <= 0 {
		c.buffer = CaptureBuffer
	}
	if len(c.sources) == 0 {
		c.sources = m.sourceNames
	}
	for i, s := range c.sources {
		if !m.sources[s] {
			return nil, &FieldError{Field: "sources[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf("%q is not a known NF type (topics: %v)", s, m.sourceNames)}
		}
	}
	if q.Duration < 0 {
		return nil, &FieldError{Field: "duration", Msg: "must not be negative"}
	}
	var terms []string
	if q.Filter != "" {
		terms = append(terms, "("+q.Filter+")")
	}
	if q.SUPI != "" {
		if !captureSUPI.MatchString(q.SUPI) {
			return nil, &FieldError{Field: "supi", Msg: fmt.Sprintf("%q: want imsi- and 5 to 15 digits", q.SUPI)}
		}
		terms = append(terms, "supi == "+strconv.Quote("imsi-"+strings.TrimPrefix(q.SUPI, "imsi-")))
	}
	if q.GPSI != "" {
		if !captureGPSI.MatchString(q.GPSI) {
			return nil, &FieldError{Field: "gpsi", Msg: fmt.Sprintf("%q: want msisdn- and 5 to 15 digits", q.GPSI)}
		}
		terms = append(terms, "gpsi == "+strconv.Quote("msisdn-"+strings.TrimPrefix(strings.TrimPrefix(q.GPSI, "msisdn-"), "+")))
	}
	if len(terms) > 0 {
		flt, _, _, err := compileFilter(&FeedSpec{Filter: strings.Join(terms, " && ")}, false)
		if err != nil {
			if q.Filter != "" {
				if _, _, _, ferr := compileFilter(&FeedSpec{Filter: q.Filter}, false); ferr != nil {
					return nil, ferr // the filter's own error, with its line and column
				}
			}
			return nil, err
		}
		c.filt = flt
	}
	for i, d := range q.Directions {
		dir := nfcopy.ParseDirection(d)
		if dir == nfcopy.DirUnknown {
			return nil, &FieldError{Field: "directions[" + strconv.Itoa(i) + "]",
				Msg: fmt.Sprintf("%q: want REQUEST_INGRESS, REQUEST_EGRESS, RESPONSE_INGRESS or RESPONSE_EGRESS", d)}
		}
		c.dirs[dir] = true
	}
	if len(q.Directions) == 0 {
		for i := range c.dirs {
			c.dirs[i] = true
		}
	}
	return c, nil
}

// read polls until ctx ends, queueing each poll's matching copies for the
// writer, or dropping them when the writer is CaptureBuffer behind; it
// closes queue as it returns.
func (c *capture) read(ctx context.Context, cl *kgo.Client, queue chan<- captured) {
	defer close(queue)
	// No group, so no membership to prove: the shared poll step for its
	// fetch errors, logged once per burst.
	rd := &reader{src: cl, maxBatch: 2000, log: c.m.log, what: "live capture", failed: func(error) {}}
	for ctx.Err() == nil {
		fs := rd.poll(ctx, ctx, nil)
		if ctx.Err() != nil {
			return
		}
		var b captured
		fs.EachRecord(func(r *kgo.Record) {
			cp := new(nfcopy.Copy)
			if err := nfcopy.Decode(r.Value, cp); err != nil {
				c.invalid.Add(1)
				return
			}
			if !c.dirs[cp.Direction] || c.filt != nil && !c.filt.Match(cp) {
				return
			}
			b.copies = append(b.copies, cp)
			b.bytes += int64(len(r.Value))
		})
		if len(b.copies) == 0 {
			continue
		}
		if c.queued.Load()+b.bytes > c.buffer {
			c.drop(b.copies)
			continue
		}
		c.queued.Add(b.bytes)
		select {
		case queue <- b:
		default:
			c.queued.Add(-b.bytes)
			c.drop(b.copies)
		}
	}
}

func (c *capture) drop(batch []*nfcopy.Copy) {
	c.dropped.Add(int64(len(batch)))
	c.m.m.captureDropped.Add(float64(len(batch)))
}

// captured is a poll's matching copies and their raw size, queued for
// the writer.
type captured struct {
	copies []*nfcopy.Copy
	bytes  int64
}

// captureMetrics are the live captures'.
type captureMetrics struct {
	capturesActive prometheus.Gauge
	captureCopies  prometheus.Counter
	captureDropped prometheus.Counter
}

func newCaptureMetrics() captureMetrics {
	return captureMetrics{
		capturesActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_captures_active",
			Help: "Live captures streaming from this node (GET /api/v1/capture, signalbox extcap)."}),
		captureCopies: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_capture_copies_total",
			Help: "Copies written to live captures."}),
		captureDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_capture_dropped_total",
			Help: "Copies a live capture matched but dropped because its client read too slowly."}),
	}
}
