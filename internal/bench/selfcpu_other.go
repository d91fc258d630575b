//go:build !unix

package bench

import "time"

// selfCPU is unknown off Unix.
func selfCPU() time.Duration { return -1 }
