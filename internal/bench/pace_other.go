//go:build !linux

package bench

import (
	"context"
	"errors"
)

// preciseTimers: the precise pacer needs Linux's timerfd (pace_linux.go).
const preciseTimers = false

func newPrecisePacer(context.Context) (pacer, error) {
	return nil, errors.New("-pace precise: needs Linux's timerfd")
}
