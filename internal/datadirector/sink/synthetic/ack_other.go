//go:build !linux

package synthetic

import "syscall"

// unackedBytes cannot read TCP acknowledgements on this platform: a written
// batch counts as delivered (see ack_linux.go).
func unackedBytes(syscall.RawConn) (int, bool) { return 0, false }

func connAlive(syscall.RawConn) bool { return true }
