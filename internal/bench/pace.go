package bench

import (
	"context"
	"fmt"
	"time"
)

// How an open-loop connection sleeps until its next call is due (-pace).
//
// Go's runtime timers are the cheap clock, but not a precise one: when the
// process has nothing else to do the runtime sleeps in epoll_wait, whose
// timeout is whole milliseconds, so a call due in 0.3 ms goes out ~1 ms
// later and the open loop charges that lateness to the server it measures.
// On this project's box at 5,000 calls/s over 32 connections the calls went
// out 0.41-0.45 ms late at the median, more than the server took to answer
// them. The precise pacer (Linux) sleeps on a timerfd, a file the runtime's
// poller waits on like a socket and the kernel arms to the nanosecond, so
// its expiry wakes epoll_wait itself: 0.055 ms late at the median. It costs
// a wake-up and two system calls per call, which on a box where generator
// and server share two cores is CPU taken from the server: at 15,000
// calls/s the precise pacer's run had p99 5.5 ms against 2.5 ms with
// runtime timers, whose wake-ups serve many due calls at once when the
// generator is busy. Hence auto: precise below paceAutoRate, runtime at and
// above it (BENCHMARKS.md, "How `bench curri` measures").
const (
	paceAuto    = "auto"
	pacePrecise = "precise"
	paceRuntime = "runtime"

	paceAutoRate = 10_000
)

// resolvePace turns -pace into the pacer an open loop at rate uses.
func resolvePace(pace string, rate int) (string, error) {
	switch pace {
	case paceAuto:
		if rate < paceAutoRate && preciseTimers {
			return pacePrecise, nil
		}
		return paceRuntime, nil
	case pacePrecise:
		if !preciseTimers {
			return "", fmt.Errorf("-pace precise: needs Linux's timerfd")
		}
		return pace, nil
	case paceRuntime:
		return pace, nil
	}
	return "", fmt.Errorf("-pace %q: want auto, precise or runtime", pace)
}

type pacer interface {
	// wait returns when due has come (at once if it has), or an error
	// when the context the pacer was made with ended first.
	wait(due time.Time) error
	close()
}

func newPacer(ctx context.Context, pace string) (pacer, error) {
	if pace == pacePrecise {
		return newPrecisePacer(ctx)
	}
	return &timerPacer{ctx: ctx, timer: time.NewTimer(time.Hour)}, nil
}

// timerPacer sleeps on a runtime timer.
type timerPacer struct {
	ctx   context.Context
	timer *time.Timer
}

func (p *timerPacer) wait(due time.Time) error {
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	p.timer.Reset(d)
	select {
	case <-p.ctx.Done():
		return p.ctx.Err()
	case <-p.timer.C:
		return nil
	}
}

func (p *timerPacer) close() { p.timer.Stop() }
