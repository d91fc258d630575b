package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// supervisor holds the server's parts in the order they started and stops
// them in the reverse order: what starts later uses what started earlier
// (CURRI the policies, the call log the store, the feeds the broker), so it
// stops first. Start registers each part as it comes up; a Start that fails
// and Shutdown both stop what was registered, and nothing else does.
type supervisor struct {
	log  *slog.Logger
	base context.Context // parent of the parts' own contexts (values only)

	mu    sync.Mutex
	parts []part
}

// part is one started part of the server and how it stops, bounded by ctx.
type part struct {
	name string
	stop func(ctx context.Context) error
}

func newSupervisor(ctx context.Context, log *slog.Logger) *supervisor {
	return &supervisor{log: log, base: context.WithoutCancel(ctx)}
}

// add registers a part that has started; stop undoes it.
func (sv *supervisor) add(name string, stop func(ctx context.Context) error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.parts = append(sv.parts, part{name: name, stop: stop})
}

// closer registers a part whose stop is a Close that cannot be told to hurry.
func (sv *supervisor) closer(name string, close func()) {
	sv.add(name, func(context.Context) error { close(); return nil })
}

// run starts fn on a goroutine of its own, a part that runs until its
// context is cancelled: its stop cancels that context and waits for fn to
// return (at most until the stop's ctx ends). An error fn returns, other
// than its context's, is the stop's.
func (sv *supervisor) run(name string, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(sv.base)
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	sv.add(name, func(stopCtx context.Context) error {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-stopCtx.Done():
			return errors.New("still running at the shutdown timeout")
		}
	})
}

// loop is run for a function that returns nothing.
func (sv *supervisor) loop(name string, fn func(ctx context.Context)) {
	sv.run(name, func(ctx context.Context) error { fn(ctx); return nil })
}

// stop stops every registered part, the last started first, each with
// what is left of ctx, and forgets them. Errors name their part.
func (sv *supervisor) stop(ctx context.Context) error {
	sv.mu.Lock()
	parts := sv.parts
	sv.parts = nil
	sv.mu.Unlock()
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		t0 := time.Now()
		if err := p.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			sv.log.Warn("stopping", "part", p.name, "err", err)
			continue
		}
		if d := time.Since(t0); d > 500*time.Millisecond {
			sv.log.Info("stopped slowly", "part", p.name, "took", d.Round(time.Millisecond))
		}
	}
	return errors.Join(errs...)
}
