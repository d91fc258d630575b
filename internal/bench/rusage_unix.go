//go:build unix

package bench

import (
	"os"
	"syscall"
	"time"
)

// selfSample is the bench process's own CPU (and peak RSS) from getrusage.
func selfSample() procSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return procSample{At: time.Now(), CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), HWMKiB: ru.Maxrss}
}

// peakRSS is an ended child's peak resident set, KiB (Linux's unit).
func peakRSS(st *os.ProcessState) int64 {
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
