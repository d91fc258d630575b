package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const preciseTimers = true

// fdPacer sleeps on a timerfd (pace.go says why).
type fdPacer struct {
	f    *os.File
	fd   int
	stop func() bool
	buf  [8]byte
}

func newPrecisePacer(ctx context.Context) (pacer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// A non-blocking descriptor is registered with the runtime's poller,
	// so a Read parks the goroutine, not a thread.
	p := &fdPacer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
	// Closing the file wakes a Read parked on it: that is how a wait ends
	// when ctx does.
	p.stop = context.AfterFunc(ctx, func() { _ = p.f.Close() })
	return p, nil
}

func (p *fdPacer) wait(due time.Time) error {
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(p.fd, 0, &spec, nil); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	// The read returns the expiry count once the timer has fired. A
	// relative CLOCK_MONOTONIC timer does not fire before due: time.Until
	// reads the same clock.
	_, err := p.f.Read(p.buf[:])
	return err
}

func (p *fdPacer) close() {
	p.stop()
	_ = p.f.Close()
}
