//go:build !unix

package bench

import (
	"os"
	"time"
)

// selfSample has no getrusage here: the benchmarks measure on Linux; the
// binary builds elsewhere for its other commands (extcap on Windows).
func selfSample() procSample { return procSample{At: time.Now()} }

// peakRSS is unknown here.
func peakRSS(*os.ProcessState) int64 { return 0 }
