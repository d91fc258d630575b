//go:build !linux

package synthetic

import "syscall"

// ackState cannot read TCP acknowledgements on this platform: a written
// batch counts as delivered (see ack_linux.go).
func ackState(syscall.RawConn) (int, bool, bool) { return 0, true, false }
