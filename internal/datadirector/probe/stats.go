package probe

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxFirstErrors bounds the invalid examples a report keeps.
const maxFirstErrors = 5

// Latency is end-to-end latency in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Avg   float64 `json:"avg_us"`
	P50   int64   `json:"p50_us"`
	P90   int64   `json:"p90_us"`
	P95   int64   `json:"p95_us"`
	P99   int64   `json:"p99_us"`
	P999  int64   `json:"p99_9_us"`
	Max   int64   `json:"max_us"`
}

// Report is what the probe has seen.
type Report struct {
	Mode     string  `json:"mode"`
	Elapsed  float64 `json:"elapsed_s"`
	Received int64   `json:"received"`   // copies, valid ones, duplicates included
	Bytes    int64   `json:"bytes"`      // bytes of those copies (pcap record or JSON record)
	Body     int64   `json:"body_bytes"` // of which message bodies (DATA frames or 5g-sbi-message)
	Rate     float64 `json:"rate"`       // received per second over Elapsed
	Unique   int64   `json:"unique"`
	// Duplicates are copies whose x-signalbox-seq was already seen.
	Duplicates int64 `json:"duplicates"`
	// Missing counts seq numbers below the highest seen (per run and NF
	// type) that never arrived, plus any shortfall against Expect. Copies in
	// flight may still fill a gap, so only the final report's figure is a loss.
	Missing        int64            `json:"missing"`
	NoSeq          int64            `json:"no_seq"` // valid copies without x-signalbox-seq
	Invalid        int64            `json:"invalid"`
	InvalidReasons map[string]int64 `json:"invalid_reasons,omitempty"`
	FirstErrors    []string         `json:"first_errors,omitempty"`
	Control        int64            `json:"control_packets"` // preface/SETTINGS-only packets (synthetic)
	// Aborted counts HTTP/2 requests the sender abandoned before their body
	// was complete (it stopped or restarted): not copies, and not invalid,
	// as an at-least-once sender sends them again.
	Aborted     int64            `json:"aborted_requests,omitempty"`
	Connections int64            `json:"connections"`
	Warmup      int64            `json:"warmup,omitempty"` // copies of Config.IgnoreRun, in no other figure
	PerNF       map[string]int64 `json:"per_nf"`
	// Records counts xDR transaction records (an xdr feed over HTTP/2) by
	// result; Unique and Duplicates then count transactions.
	Records map[string]int64 `json:"xdr_results,omitempty"`
	Latency Latency          `json:"latency"`
	// Windows are the figures of each Config.Window, oldest first (a soak:
	// does latency stay flat?).
	Windows []Window `json:"windows,omitempty"`
}

// Window is what arrived in one window of Config.Window.
type Window struct {
	End      time.Time `json:"end"`
	Received int64     `json:"received"`
	Latency  Latency   `json:"latency"`
}

// seqTrack is the set of seq numbers seen for one run/NF type: all up to low,
// plus the out-of-order ones above it, as bits from base on (a copy stream
// interleaves the producer's partitions, so most copies arrive out of
// order, and a map of them would be a hash per copy). Numbers too far
// ahead for the window go to far.
type seqTrack struct {
	low, max int64
	base     int64    // the number of bit 0 of bits; base <= low+1
	bits     []uint64 // numbers above low seen, from base
	npend    int64    // numbers above low seen (in bits or far)
	far      map[int64]struct{}
	window   int64 // bounds the bit window; 0: seqWindow (the tests set less)
}

// seqWindow bounds the bit window (16 MiB of bits) a stuck low can grow.
const seqWindow int64 = 1 << 27

// limit is the track's bit window.
func (s *seqTrack) limit() int64 {
	if s.window > 0 {
		return s.window
	}
	return seqWindow
}

// add records n and reports whether it is new.
func (s *seqTrack) add(n int64) bool {
	if n <= s.low {
		return false
	}
	s.max = max(s.max, n)
	if n == s.low+1 && s.npend == 0 {
		s.low = n
		return true
	}
	if s.npend == 0 { // every bit is at or below low: start the window here
		clear(s.bits)
		s.base = s.low + 1
	}
	i := n - s.base
	if i >= s.limit() {
		if _, dup := s.far[n]; dup {
			return false
		}
		if s.far == nil {
			s.far = map[int64]struct{}{}
		}
		s.far[n] = struct{}{}
		s.npend++
		return true
	}
	if !s.set(i) {
		return false
	}
	s.npend++
	s.advance()
	return true
}

// advance moves low over the numbers seen right above it, and the window
// with it.
func (s *seqTrack) advance() {
	for s.npend > 0 {
		i := s.low + 1 - s.base
		if i < s.limit() && int(i>>6) < len(s.bits) {
			if s.bits[i>>6]&(1<<(i&63)) == 0 {
				break
			}
		} else if _, ok := s.far[s.low+1]; ok {
			delete(s.far, s.low+1)
		} else {
			break
		}
		s.low++
		s.npend--
	}
	// Drop whole words below low once they are half the window.
	if k := int((s.low + 1 - s.base) >> 6); k > 0 && 2*k >= len(s.bits) {
		k = min(k, len(s.bits))
		n := copy(s.bits, s.bits[k:])
		clear(s.bits[n:])
		s.bits = s.bits[:n]
		s.base += int64(k) << 6
		// Far numbers that now fit the window move into it.
		for m := range s.far {
			if j := m - s.base; j < s.limit() {
				delete(s.far, m)
				s.set(j)
			}
		}
	}
}

// set sets bit i of the window, growing it; false if it was set already.
func (s *seqTrack) set(i int64) bool {
	w, bit := int(i>>6), uint64(1)<<(i&63)
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	if s.bits[w]&bit != 0 {
		return false
	}
	s.bits[w] |= bit
	return true
}

func (s *seqTrack) unique() int64  { return s.low + s.npend }
func (s *seqTrack) missing() int64 { return s.max - s.unique() }

// stats is the probe's shared state; one mutex, taken once per copy.
type stats struct {
	mu       sync.Mutex
	start    time.Time
	received int64
	bytes    int64
	body     int64
	unique   int64
	dups     int64
	noSeq    int64
	invalid  int64
	reasons  map[string]int64
	first    []string
	control  int64
	aborted  int64
	conns    int64
	perNF    map[string]*int64    // pointers: counting a known NF never assigns, which would store its (maybe aliasing) key anew
	seqs     map[string]*seqTrack // "run/nf"
	hist     *hdrhistogram.Histogram
	win      *hdrhistogram.Histogram // this window's (closeWindow)
	winRecv  int64
	windows  []Window
	expect   int64
	ignore   string // run id counted only in warm
	warm     int64
	done     chan struct{}
	doneOnce sync.Once
	records  map[string]bool  // xDR records seen, by correlation id
	results  map[string]int64 // xDR records by result
}

func newStats(expect int64, ignoreRun string) *stats {
	return &stats{
		start: time.Now(), reasons: map[string]int64{}, perNF: map[string]*int64{}, seqs: map[string]*seqTrack{},
		// 1 µs to 1 hour at 3 significant figures.
		hist: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3), expect: expect, ignore: ignoreRun, done: make(chan struct{}),
		win: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
	}
}

// copySeen records one valid copy. seq is the x-signalbox-seq value, nfType
// the copy's NF type (from the seq when the copy carries none), sent its send
// time in ns since the epoch (0 = unknown).
func (s *stats) copySeen(seq, nfType string, size, body int, sent int64, now time.Time) {
	var lat int64 = -1
	if sent > 0 {
		lat = (now.UnixNano() - sent) / 1000
		if lat < 0 {
			lat = 0
		}
	}
	key, n, okSeq := parseSeq(seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	if okSeq && s.ignore != "" && len(key) > len(s.ignore) && key[len(s.ignore)] == '/' && key[:len(s.ignore)] == s.ignore {
		s.warm++
		return
	}
	s.received++
	s.winRecv++
	s.bytes += int64(size)
	s.body += int64(body)
	if lat >= 0 {
		s.latency(max(lat, 1))
	}
	if !okSeq {
		s.noSeq++
		s.unique++
		s.countNF(nfType)
		s.checkDone()
		return
	}
	tr := s.seqs[key]
	if tr == nil {
		tr = &seqTrack{}
		s.seqs[strings.Clone(key)] = tr
	}
	if !tr.add(n) {
		s.dups++
		return
	}
	s.unique++
	if nfType == "" {
		_, nfType, _ = strings.Cut(key, "/")
	}
	s.countNF(nfType)
	s.checkDone()
}

func (s *stats) countNF(nfType string) {
	if n := s.perNF[nfType]; n != nil {
		*n++
		return
	}
	n := int64(1)
	s.perNF[strings.Clone(nfType)] = &n // nfType may alias a reused buffer
}

func (s *stats) checkDone() {
	if s.expect > 0 && s.unique >= s.expect {
		s.doneOnce.Do(func() { close(s.done) })
	}
}

// parseSeq splits "run/nf/n" into "run/nf" and n.
func parseSeq(seq string) (string, int64, bool) {
	i := strings.LastIndexByte(seq, '/')
	if i <= 0 || strings.IndexByte(seq[:i], '/') <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(seq[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return seq[:i], n, true
}

// bad records an invalid copy or packet with a bounded reason label.
func (s *stats) bad(reason, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalid++
	s.reasons[reason]++
	if len(s.first) < maxFirstErrors {
		s.first = append(s.first, reason+": "+detail)
	}
}

// count adds one to a counter of s (control, aborted, conns).
func (s *stats) count(n *int64) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

func (s *stats) report(mode string) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := time.Since(s.start).Seconds()
	r := Report{
		Mode: mode, Elapsed: el, Received: s.received, Bytes: s.bytes, Body: s.body, Unique: s.unique, Duplicates: s.dups,
		NoSeq: s.noSeq, Invalid: s.invalid, Control: s.control, Aborted: s.aborted, Connections: s.conns, Warmup: s.warm,
		InvalidReasons: map[string]int64{}, PerNF: map[string]int64{},
		FirstErrors: append([]string(nil), s.first...),
	}
	if el > 0 {
		r.Rate = float64(s.received) / el
	}
	for k, v := range s.reasons {
		r.InvalidReasons[k] = v
	}
	if len(s.results) > 0 {
		r.Records = map[string]int64{}
		for k, v := range s.results {
			r.Records[k] = v
		}
	}
	for k, v := range s.perNF {
		r.PerNF[k] = *v
	}
	for _, tr := range s.seqs {
		r.Missing += tr.missing()
	}
	if s.expect > 0 && s.unique < s.expect {
		r.Missing = max(r.Missing, s.expect-s.unique)
	}
	r.Latency = latencyOf(s.hist)
	r.Windows = append([]Window(nil), s.windows...)
	return r
}

// latency records one copy's end-to-end latency in µs; s.mu is held.
// Clamped: a copy older than the histograms' hour is their slowest, not
// dropped (RecordValue refuses it, making an error).
func (s *stats) latency(us int64) {
	us = min(us, s.hist.HighestTrackableValue())
	_ = s.hist.RecordValue(us)
	_ = s.win.RecordValue(us)
}

// closeWindow ends the current window at now (Config.Window).
func (s *stats) closeWindow(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, Window{End: now, Received: s.winRecv, Latency: latencyOf(s.win)})
	s.win.Reset()
	s.winRecv = 0
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	return Latency{Count: h.TotalCount(), Avg: h.Mean(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P95: h.ValueAtQuantile(95), P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}
