package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

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
