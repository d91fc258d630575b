//go:build unix

package bench

import (
	"syscall"
	"time"
)

// selfCPU is the CPU time this process (the load generator) has used, user
// and system; -1 if unknown.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
