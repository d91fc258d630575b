//go:build linux

package synthetic

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// A pcap stream has no application-level acknowledgement, so the peer's TCP
// ACK is the strongest delivery signal a sender can have: a batch counts as
// delivered once the consumer's kernel has acknowledged every byte.

// unackedBytes reports how many bytes written to the connection the peer has
// not acknowledged yet (SIOCOUTQ); ok=false when the platform cannot tell.
// A reset empties the queue too, so a drop in it is only an acknowledgement
// once connAlive says so.
func unackedBytes(rc syscall.RawConn) (n int, ok bool) {
	var qerr error
	if err := rc.Control(func(fd uintptr) { n, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || qerr != nil {
		return 0, false
	}
	return n, true
}

// connAlive reports whether the connection is still usable: ESTABLISHED
// (1), or CLOSE_WAIT (8), where the peer sent FIN but still acknowledged
// what it received. Anything else (e.g. CLOSE after a reset) means
// unacknowledged data is lost.
func connAlive(rc syscall.RawConn) bool {
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return false
	}
	return info.State == 1 || info.State == 8
}
