//go:build linux

package synthetic

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ackState reports how many bytes written to the connection the peer has
// not acknowledged yet, and whether the connection is still usable (not
// reset). A pcap stream has no application-level acknowledgement, so the
// peer's TCP ACK is the strongest delivery signal a sender can have: a batch
// counts as delivered once the consumer's kernel has acknowledged every byte.
func ackState(rc syscall.RawConn) (unacked int, alive bool, ok bool) {
	var info *unix.TCPInfo
	var outq int
	var ierr, qerr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		outq, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	}); err != nil || ierr != nil || qerr != nil {
		return 0, false, false
	}
	// ESTABLISHED (1), or CLOSE_WAIT (8): the peer sent FIN but still
	// acknowledged what it received. Anything else (e.g. CLOSE after a
	// reset) means unacknowledged data is lost.
	alive = info.State == 1 || info.State == 8
	return outq, alive, true
}
