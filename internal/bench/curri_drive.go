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
	fromSend  *hdrhistogram.Histogram // from a call's write to its answer
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

func newTally() *tally { return &tally{hist: newHist(), lag: newHist(), fromSend: newHist()} }

func (t *tally) merge(o *tally) {
	t.hist.Merge(o.hist)
	t.lag.Merge(o.lag)
	t.fromSend.Merge(o.fromSend)
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
		conns[i] = cfg.newConn()
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
		// The window's end is due even when the load goroutines' context
		// has just been cancelled at it.
		if !pauseUntil(parent, end) {
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

// newConn is a connection to the target as the run makes them, not yet
// dialled.
func (cfg *driveConfig) newConn() *conn {
	c := newConn(cfg.addr, cfg.head, cfg.timeout)
	c.tlsConf = cfg.tls
	return c
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
			c := cfg.newConn()
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
	recordUs(t.fromSend, done.Sub(sent))
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
