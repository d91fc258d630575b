package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 60 s at 3 significant digits.
const (
	histMinUs = 1
	histMaxUs = 60_000_000
	histSig   = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMinUs, histMaxUs, histSig) }

func recordUs(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < histMinUs {
		us = histMinUs
	}
	if us > histMaxUs {
		us = histMaxUs
	}
	_ = h.RecordValue(us)
}

// pooled is one pre-rendered request and the class it was drawn for.
type pooled struct {
	class int
	req   []byte
}

type driveConfig struct {
	addr        string
	tls         *tls.Config   // nil: plain HTTP
	reconnect   time.Duration // 0: connections stay up
	storm       int           // connections opened at once mid-window
	head        []byte
	pool        []pooled
	conns       int
	rate        int    // 0 = closed loop
	pace        string // open loop: pacePrecise or paceRuntime
	warmup      time.Duration
	duration    time.Duration
	timeout     time.Duration
	reloadEvery time.Duration
	reloadWhat  string // rules | directory
	directory   int
	changed     float64
	shape       RuleShape
	api         *apiClient // nil: no rule loading, no server stats
	log         io.Writer
}

// tally is one connection's counts, merged at the end (no sharing on the
// hot path).
type tally struct {
	hist      *hdrhistogram.Histogram
	lag       *hdrhistogram.Histogram // open loop: from a call's due time to its write
	calls     int64                   // answered (any status) in the measured window
	decisions [numDecisions]int64
	byClass   [numClasses][numDecisions]int64
	transport int64
	non200    int64
	unsent    int64 // open loop: slots never sent because the run hit its hard stop
	warmup    int64 // calls in the warmup
	warmupErr int64
	firstErr  string

	reconnects, reconnectErr int64
}

func newTally() *tally { return &tally{hist: newHist(), lag: newHist()} }

func (t *tally) merge(o *tally) {
	t.hist.Merge(o.hist)
	t.lag.Merge(o.lag)
	t.calls += o.calls
	for i := range t.decisions {
		t.decisions[i] += o.decisions[i]
	}
	for c := range t.byClass {
		for d := range t.byClass[c] {
			t.byClass[c][d] += o.byClass[c][d]
		}
	}
	t.transport += o.transport
	t.non200 += o.non200
	t.unsent += o.unsent
	t.warmup += o.warmup
	t.warmupErr += o.warmupErr
	t.reconnects += o.reconnects
	t.reconnectErr += o.reconnectErr
	if t.firstErr == "" {
		t.firstErr = o.firstErr
	}
}

// swapWindow collects the calls intended from the start of a rule-set
// replacement until shortly after it is live.
type swapWindow struct {
	start     time.Time
	end       atomic.Int64 // unix nanos when the window closed; 0 while open
	swapStart time.Time    // a control window's (quietWindow): its swap's start; zero for a swap window
	control   *swapWindow  // this swap's control window, if one fitted before the next swap
	mu        sync.Mutex
	hist      *hdrhistogram.Histogram
	lag       *hdrhistogram.Histogram // the generator's send lag of the window's calls
	calls     int64
	transport int64
	non200    int64
	indet     int64
	// The server's own request-time histogram scraped as the window opened
	// and as it closed (nil if a scrape failed): what the server took to
	// answer, read to written, apart from the box's queueing around it.
	srvFirst, srvLast []bucket
}

func newWindow(start time.Time) *swapWindow {
	return &swapWindow{start: start, hist: newHist(), lag: newHist()}
}

// windowStats is a window's figures, as the report gives them for a swap
// window and for its control window.
type windowStats struct {
	calls                   int64
	p99, max                int64 // µs, from the intended send time
	lagP99, lagMax          int64 // µs
	srvP99, srvP999, srvMax bucketBound
	srvOver5ms              int64 // the server's requests over 5 ms; -1 unknown
	transport               int64
	non200, indet           int64
}

func (w *swapWindow) stats() windowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := windowStats{calls: w.calls, transport: w.transport, non200: w.non200, indet: w.indet,
		srvP99:     bucketBound(bucketQuantile(w.srvFirst, w.srvLast, 0.99)),
		srvP999:    bucketBound(bucketQuantile(w.srvFirst, w.srvLast, 0.999)),
		srvMax:     bucketBound(bucketQuantile(w.srvFirst, w.srvLast, 1)),
		srvOver5ms: bucketOver(w.srvFirst, w.srvLast, 0.005)}
	if w.calls > 0 {
		st.p99, st.max = w.hist.ValueAtQuantile(99), w.hist.Max()
		st.lagP99, st.lagMax = w.lag.ValueAtQuantile(99), w.lag.Max()
	}
	return st
}

// holds reports whether a call due at due belongs to the window: due from
// the PUT until the window closed. Such a call is counted whenever it is
// answered, so a schedule running behind still charges the swap.
func (w *swapWindow) holds(due time.Time) bool {
	if due.Before(w.start) {
		return false
	}
	e := w.end.Load()
	return e == 0 || due.UnixNano() < e
}

// fill copies the window's tallies into its reload result.
func (w *swapWindow) fill(rr *reloadResult) {
	st := w.stats()
	rr.Calls, rr.TransportErrors, rr.Non200, rr.Indeterminate = st.calls, st.transport, st.non200, st.indet
	rr.P99Us, rr.MaxUs = st.p99, st.max
	rr.LagP99Us, rr.LagMaxUs = st.lagP99, st.lagMax
	rr.ServerP99S, rr.ServerP999S, rr.ServerMaxS, rr.ServerOver5ms = st.srvP99, st.srvP999, st.srvMax, st.srvOver5ms
}

// record counts a call due in the window: lat from its due time to its
// answer, lag from its due time to its write.
func (w *swapWindow) record(lat, lag time.Duration, resp response, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	recordUs(w.lag, lag)
	switch {
	case err != nil:
		w.transport++
		return
	case resp.status != 200:
		w.non200++
	case resp.decision == decIndeterminate:
		w.indet++
	}
	w.calls++
	recordUs(w.hist, lat)
}

// fillQuiet copies a control window's tallies into the reload result of
// the swap it stands beside.
func (w *swapWindow) fillQuiet(rr *reloadResult) {
	st := w.stats()
	rr.QuietCalls = st.calls
	rr.QuietErrors = st.transport + st.non200 + st.indet
	rr.QuietAtS = rr.AtS + w.start.Sub(w.swapStart).Seconds()
	rr.QuietP99Us, rr.QuietMaxUs = st.p99, st.max
	rr.QuietLagP99Us, rr.QuietLagMaxUs = st.lagP99, st.lagMax
	rr.QuietServerP99S, rr.QuietServerP999S, rr.QuietServerMaxS, rr.QuietServerOver5ms = st.srvP99, st.srvP999, st.srvMax, st.srvOver5ms
}

// quietWindow is a control window for the swap window w that just closed:
// as long as w, starting halfway to the next swap, when no replacement
// runs; nil if it would not end before next (the next swap, or the end of
// the run). What the calls of the control window show is what this box
// gives without a swap (the generator shares its cores), against which the
// swap window's tail is to be read.
func quietWindow(w *swapWindow, every time.Duration, next time.Time) *swapWindow {
	length := time.Duration(w.end.Load() - w.start.UnixNano())
	qs := w.start.Add(every / 2)
	if length <= 0 || !qs.Add(length).Before(next) {
		return nil
	}
	q := newWindow(qs)
	q.swapStart = w.start
	q.end.Store(qs.Add(length).UnixNano())
	return q
}

// swapTail is how long after going live a swap window keeps collecting:
// the old snapshot's garbage and the new one's first use land here.
const swapTail = 250 * time.Millisecond

type driveResult struct {
	tally       *tally
	measured    time.Duration
	genCPU      time.Duration // the generator's own CPU over the measured window; -1 unknown
	storm       *stormResult
	server      *serverResult
	reloads     []reloadResult
	serverError string
}

type serverResult struct {
	// call records the server produced, dropped and failed over the
	// measured window (-calls-stream; -1: not streaming)
	callsProduced, callsDropped, callsFailed float64
	cpuSeconds                               float64
	rssStart                                 float64
	rssPeak                                  float64
	rssSamples                               int
	scrapeErrors                             int
	// the server's request-duration histogram at the start and end of the
	// measured window
	firstBuckets, lastBuckets []bucket
}

// drive opens the connections (each with its HEAD probe), runs warmup plus
// the measured window, and stops by itself.
func drive(ctx context.Context, cfg driveConfig) (*driveResult, error) {
	conns := make([]*conn, cfg.conns)
	for i := range conns {
		conns[i] = newConn(cfg.addr, cfg.head, cfg.timeout)
		conns[i].tlsConf = cfg.tls
		if err := conns[i].connect(); err != nil {
			for _, c := range conns[:i] {
				c.close()
			}
			return nil, fmt.Errorf("connection %d to %s: %w", i+1, cfg.addr, err)
		}
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()

	// Render every reload body up front: marshalling 100,000 rules costs the
	// load generator, which shares the cores, a CPU-second per swap, and
	// would otherwise land inside the swap windows it measures.
	var bodies [][]byte
	if cfg.api != nil && cfg.reloadEvery > 0 {
		for gen := 1; time.Duration(gen)*cfg.reloadEvery < cfg.warmup+cfg.duration; gen++ {
			var b []byte
			var err error
			if cfg.reloadWhat == "directory" {
				b = directoryCSV(cfg.directory, gen, cfg.changed)
			} else {
				b, err = json.Marshal(buildRulesChanged(cfg.shape, gen, cfg.changed))
			}
			if err != nil {
				return nil, fmt.Errorf("render reload %d: %w", gen, err)
			}
			bodies = append(bodies, b)
		}
	}

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now().Add(20 * time.Millisecond)
	measureStart := start.Add(cfg.warmup)
	end := measureStart.Add(cfg.duration)
	// Past this, an open-loop run that fell behind stops sending: what is
	// left is reported as unsent rather than stretching the run.
	hardStop := end.Add(cfg.timeout + time.Second)

	var windows atomic.Pointer[[]*swapWindow]
	var next atomic.Int64
	tallies := make([]*tally, cfg.conns)
	pacers := make([]pacer, cfg.conns)
	if cfg.rate > 0 {
		for i := range pacers {
			p, err := newPacer(ctx, cfg.pace)
			if err != nil {
				for _, p := range pacers[:i] {
					p.close()
				}
				return nil, err
			}
			pacers[i] = p
		}
		defer func() {
			for _, p := range pacers {
				p.close()
			}
		}()
	}
	var wg sync.WaitGroup
	for i := range conns {
		if cfg.reconnect > 0 {
			conns[i].nextReconnect = start.Add(cfg.reconnect * time.Duration(i+1) / time.Duration(cfg.conns))
		}
		tallies[i] = newTally()
		wg.Add(1)
		go func(c *conn, p pacer, t *tally, off int) {
			defer wg.Done()
			if cfg.rate > 0 {
				openLoop(ctx, c, p, t, cfg, start, measureStart, end, hardStop, &next, &windows)
			} else {
				closedLoop(ctx, c, t, cfg, off, measureStart, end, &windows)
			}
		}(conns[i], pacers[i], tallies[i], i*len(cfg.pool)/cfg.conns)
	}

	res := &driveResult{genCPU: -1}
	var bg sync.WaitGroup
	// The generator's own CPU over the measured window: on a shared box it
	// is CPU the server did not have, and the figure to set beside another
	// load generator's.
	bg.Add(1)
	go func() {
		defer bg.Done()
		if !pauseUntil(ctx, measureStart) {
			return
		}
		first := selfCPU()
		if !pauseUntil(ctx, end) {
			return
		}
		if last := selfCPU(); first >= 0 && last >= 0 {
			res.genCPU = last - first
		}
	}()
	if cfg.api != nil {
		res.server = &serverResult{}
		bg.Add(1)
		go func() {
			defer bg.Done()
			sampleServer(ctx, cfg.api, measureStart, end, res.server, &res.serverError)
		}()
		if cfg.reloadEvery > 0 {
			bg.Add(1)
			go func() {
				defer bg.Done()
				res.reloads = reloadLoop(ctx, cfg, bodies, start, end, &windows)
			}()
		}
	}
	if cfg.storm > 0 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			if pauseUntil(ctx, measureStart.Add(cfg.duration/2)) {
				res.storm = runStorm(cfg)
			}
		}()
	}
	wg.Wait()
	res.measured = end.Sub(measureStart)
	// The last slots fall due just before the end; let the window close
	// before the final /metrics scrape is cut short.
	pause(ctx, time.Until(end))
	cancel()
	bg.Wait()
	if err := parent.Err(); err != nil {
		return nil, err
	}
	// Every call has been accounted now, including those due in a swap
	// window that were answered after it closed.
	if ws := windows.Load(); ws != nil {
		i := 0
		for _, w := range *ws {
			if !w.swapStart.IsZero() {
				continue // a control window, filled beside its swap's
			}
			if i < len(res.reloads) {
				w.fill(&res.reloads[i])
				if w.control != nil {
					w.control.fillQuiet(&res.reloads[i])
				}
			}
			i++
		}
	}
	total := newTally()
	for _, t := range tallies {
		total.merge(t)
	}
	res.tally = total
	return res, nil
}

// stormResult is how the connections of a -storm fared.
type stormResult struct {
	conns, errors int
	firstErr      string
	connect       *hdrhistogram.Histogram // dial to HEAD answered
}

// runStorm opens cfg.storm connections at once, each with its handshake and
// HEAD probe, and closes them.
func runStorm(cfg driveConfig) *stormResult {
	out := &stormResult{conns: cfg.storm, connect: newHist()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.storm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newConn(cfg.addr, cfg.head, cfg.timeout)
			c.tlsConf = cfg.tls
			t0 := time.Now()
			err := c.connect()
			d := time.Since(t0)
			c.close()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.errors++
				if out.firstErr == "" {
					out.firstErr = err.Error()
				}
				return
			}
			recordUs(out.connect, d)
		}()
	}
	wg.Wait()
	return out
}

// openLoop takes slots from the shared schedule (slot n is due at
// start + n/rate) and measures each call from its due time, so a server
// that stalls is charged for the calls that queued behind the stall.
func openLoop(ctx context.Context, c *conn, pace pacer, t *tally, cfg driveConfig, start, measureStart, end, hardStop time.Time,
	next *atomic.Int64, windows *atomic.Pointer[[]*swapWindow]) {
	nsPerSlot := 1e9 / float64(cfg.rate)
	for {
		n := next.Add(1) - 1
		due := start.Add(time.Duration(float64(n) * nsPerSlot))
		if !due.Before(end) {
			return
		}
		now := time.Now()
		if now.After(hardStop) {
			if !due.Before(measureStart) {
				t.unsent++
			}
			continue
		}
		if due.After(now) {
			if pace.wait(due) != nil {
				return // ctx ended
			}
		} else if ctx.Err() != nil {
			return
		}
		p := &cfg.pool[int(n%int64(len(cfg.pool)))]
		sent := time.Now()
		if !due.Before(measureStart) {
			recordUs(t.lag, sent.Sub(due))
		}
		resp, err := c.do(p.req)
		account(t, p.class, due, sent, time.Now(), measureStart, resp, err, windows)
		if err != nil && c.c == nil {
			pause(ctx, 10*time.Millisecond) // do not spin on a dead server
		}
		c.maybeReconnect(cfg.reconnect, t)
	}
}

// maybeReconnect closes and reopens the connection when its turn has come
// (-reconnect-every), between calls: the other connections take the
// schedule's slots meanwhile, as CUCM's other nodes carry the calls while
// one reconnects. A failed reconnect leaves it closed; the next call redials
// and counts the failure.
func (c *conn) maybeReconnect(every time.Duration, t *tally) {
	if every <= 0 || time.Now().Before(c.nextReconnect) {
		return
	}
	c.nextReconnect = c.nextReconnect.Add(every)
	t.reconnects++
	if err := c.connect(); err != nil {
		t.reconnectErr++
		if t.firstErr == "" {
			t.firstErr = "reconnect: " + err.Error()
		}
	}
}

// closedLoop sends back to back; each connection walks the pool from its
// own offset.
func closedLoop(ctx context.Context, c *conn, t *tally, cfg driveConfig, off int, measureStart, end time.Time,
	windows *atomic.Pointer[[]*swapWindow]) {
	for i := off; ctx.Err() == nil; i++ {
		sent := time.Now()
		if !sent.Before(end) {
			return
		}
		p := &cfg.pool[i%len(cfg.pool)]
		resp, err := c.do(p.req)
		account(t, p.class, sent, sent, time.Now(), measureStart, resp, err, windows)
		if err != nil && c.c == nil {
			pause(ctx, 10*time.Millisecond)
		}
		c.maybeReconnect(cfg.reconnect, t)
	}
}

// pauseUntil waits until t; false if ctx ended first.
func pauseUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func pause(ctx context.Context, d time.Duration) { pauseUntil(ctx, time.Now().Add(d)) }

// account counts a call due at due (sent at sent, answered at done).
func account(t *tally, class int, due, sent, done, measureStart time.Time, resp response, err error, windows *atomic.Pointer[[]*swapWindow]) {
	lat := done.Sub(due)
	if ws := windows.Load(); ws != nil {
		for _, w := range *ws {
			if w.holds(due) {
				w.record(lat, sent.Sub(due), resp, err)
			}
		}
	}
	if due.Before(measureStart) {
		t.warmup++
		if err != nil || resp.status != 200 {
			t.warmupErr++
		}
		return
	}
	if err != nil {
		t.transport++
		if t.firstErr == "" {
			t.firstErr = err.Error()
		}
		return
	}
	t.calls++
	recordUs(t.hist, lat)
	if resp.status != 200 {
		t.non200++
		if t.firstErr == "" {
			t.firstErr = fmt.Sprintf("HTTP status %d", resp.status)
		}
		return
	}
	t.decisions[resp.decision]++
	t.byClass[class][resp.decision]++
}

// sampleServer reads the server's CPU at the edges of the measured window
// and its RSS every second.
func sampleServer(ctx context.Context, api *apiClient, measureStart, end time.Time, out *serverResult, errOut *string) {
	scrape := func() (procStats, bool) {
		ps, err := api.scrapeBy(ctx)
		if err != nil {
			out.scrapeErrors++
			if *errOut == "" {
				*errOut = err.Error()
			}
			return ps, false
		}
		return ps, true
	}
	if !pauseUntil(ctx, measureStart) {
		return
	}
	first, ok := scrape()
	if !ok {
		return
	}
	out.rssStart, out.rssPeak, out.rssSamples = first.rssBytes, first.rssBytes, 1
	out.firstBuckets = first.buckets
	for t := measureStart.Add(time.Second); t.Before(end); t = t.Add(time.Second) {
		if !pauseUntil(ctx, t) {
			return
		}
		if ps, ok := scrape(); ok {
			out.rssPeak = max(out.rssPeak, ps.rssBytes)
			out.rssSamples++
		}
	}
	// The end scrape is due at the end of the window even if the load
	// goroutines have been cancelled by then.
	pauseUntil(ctx, end)
	if last, ok := scrape(); ok {
		out.lastBuckets = last.buckets
		out.cpuSeconds = last.cpuSeconds - first.cpuSeconds
		out.callsProduced, out.callsDropped, out.callsFailed = -1, -1, -1
		if last.callsProduced >= 0 && first.callsProduced >= 0 {
			out.callsProduced = last.callsProduced - first.callsProduced
			out.callsDropped = last.callsDropped - first.callsDropped
			out.callsFailed = last.callsFailed - first.callsFailed
		}
		out.rssPeak = max(out.rssPeak, last.rssBytes)
		out.rssSamples++
	}
}

// reloadLoop replaces the whole rule set every cfg.reloadEvery and times
// each swap, collecting the calls of the swap window.
func reloadLoop(ctx context.Context, cfg driveConfig, bodies [][]byte, start, end time.Time, windows *atomic.Pointer[[]*swapWindow]) []reloadResult {
	var out []reloadResult
	// The server's request-time histogram at a window's edges; nil if the
	// scrape failed.
	scrape := func() []bucket {
		ps, err := cfg.api.scrapeBy(ctx)
		if err != nil {
			return nil
		}
		return ps.buckets
	}
	// The windows list is copied on write: the calls' goroutines read it.
	addWindow := func(w *swapWindow) {
		var list []*swapWindow
		if ws := windows.Load(); ws != nil {
			list = append(list, *ws...)
		}
		list = append(list, w)
		windows.Store(&list)
	}
	var controls sync.WaitGroup // scraping the control windows' edges
	defer controls.Wait()
	for gen := 1; gen <= len(bodies); gen++ {
		at := start.Add(time.Duration(gen) * cfg.reloadEvery)
		if !at.Before(end) {
			return out
		}
		if !pauseUntil(ctx, at) {
			return out
		}
		first := scrape()
		w := newWindow(time.Now())
		w.srvFirst = first
		addWindow(w)
		rr := reloadResult{Generation: gen, AtS: w.start.Sub(start).Seconds()}
		var err error
		if cfg.reloadWhat == "directory" {
			err = cfg.api.replaceDirectoryCSV(ctx, bodies[gen-1])
		} else {
			err = cfg.api.replaceRulesJSON(ctx, bodies[gen-1])
		}
		rr.PutMs = ms(time.Since(w.start))
		if err == nil && cfg.reloadWhat == "directory" {
			err = cfg.api.waitName(ctx, dirCanary(gen), canaryName(gen), 30*time.Second)
		} else if err == nil {
			err = cfg.api.waitLive(ctx, gen, 30*time.Second)
		}
		rr.LiveMs = ms(time.Since(w.start))
		if err != nil {
			rr.Error = err.Error()
			fmt.Fprintf(cfg.log, "bench curri: reload %d: %v\n", gen, err)
		}
		pause(ctx, swapTail)
		last := scrape()
		w.mu.Lock()
		w.srvLast = last
		w.mu.Unlock()
		w.end.Store(time.Now().UnixNano())
		next := start.Add(time.Duration(gen+1) * cfg.reloadEvery)
		if gen == len(bodies) || next.After(end) {
			next = end
		}
		if q := quietWindow(w, cfg.reloadEvery, next); q != nil {
			w.control = q
			addWindow(q)
			controls.Add(1)
			go func() {
				defer controls.Done()
				qEnd := time.Unix(0, q.end.Load())
				if !pauseUntil(ctx, q.start) {
					return
				}
				first := scrape()
				if !pauseUntil(ctx, qEnd) {
					return
				}
				last := scrape()
				q.mu.Lock()
				q.srvFirst, q.srvLast = first, last
				q.mu.Unlock()
			}()
		}
		out = append(out, rr)
	}
	return out
}
