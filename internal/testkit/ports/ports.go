// Package ports hands tests loopback ports that a process they start will
// bind later, when that process must be told its own or a peer's port
// before it starts (two sites naming each other, an OpenID Connect
// redirect URL naming serve's port, a broker restarted on the port its
// producers know).
//
// Asking the kernel for a free port (":0"), closing it and handing the
// number to a child is a race: until the child binds it, the kernel may hand
// the same number to any process's ":0" — the other tests' servers and
// clients bind ":0" all the time. So ports come from a range the kernel
// never hands out for ":0", below /proc/sys/net/ipv4/ip_local_port_range,
// and each is taken under a lock every test process honours: an flock(2)
// on a file per port in a directory all of them share. The lock is held
// until the test ends (or its process dies: the kernel drops an flock with
// the last descriptor), so two test processes asking at once never get the
// same port. A port that something outside the tests holds is skipped: it
// is bound once, on the host asked for, before it is handed out.
//
// Anything that can bind ":0" and say where it listens should: Reserve is
// for what cannot.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// LockDirEnv names the directory of the port locks (default: signalbox-
// test-ports in the system's temporary directory). Every test process
// that runs at once must see the same one.
const LockDirEnv = "SIGNALBOX_TEST_PORT_LOCKS"

// low is the first port of the range: above the well-known ports and the
// fixed ones serve, its examples and the outside tools use (8080, 4080,
// 9092, 5432, 9000...).
const low = 20000

// Range is the range of ports Reserve hands out: [first, last].
func Range() (first, last int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		// Not Linux: IANA's ephemeral range starts at 49152.
		return low, 49151, nil
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	eph, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	if eph-1-low < 1000 {
		return 0, 0, fmt.Errorf("ip_local_port_range starts at %d: fewer than 1000 ports between %d and it for tests to reserve", eph, low)
	}
	return low, eph - 1, nil
}

// lockDir is the shared directory of the port locks.
func lockDir() (string, error) {
	dir := os.Getenv(LockDirEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "signalbox-test-ports")
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	return dir, nil
}

// Reservation is a port held for this process until Release.
type Reservation struct {
	Port int
	Addr string // host:port
	lock *os.File
	once sync.Once
}

// Release gives the port back (the lock's file stays, for the next).
func (r *Reservation) Release() {
	r.once.Do(func() { r.lock.Close() })
}

// Take reserves a port (TCP and UDP) on the loopback address host ("127.0.0.1", or
// another address of 127.0.0.0/8) for the caller, until Release.
func Take(host string) (*Reservation, error) {
	first, last, err := Range()
	if err != nil {
		return nil, err
	}
	return take(host, first, last, rand.IntN(last-first+1))
}

// take tries the ports of [first, last] from first+start on, wrapping.
func take(host string, first, last, start int) (*Reservation, error) {
	dir, err := lockDir()
	if err != nil {
		return nil, fmt.Errorf("port locks: %w", err)
	}
	n := last - first + 1
	var lastErr error
	for i := 0; i < n; i++ {
		port := first + (start+i)%n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("port locks: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				lastErr = err
			}
			continue // another test process holds it
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if err := bindable(addr); err != nil {
			f.Close() // held outside the tests: skip it
			lastErr = err
			continue
		}
		return &Reservation{Port: port, Addr: addr, lock: f}, nil
	}
	return nil, fmt.Errorf("no port free in %d-%d on %s (last: %v)", first, last, host, lastErr)
}

// Reserve is Take for a test: the port is held until the test ends, and
// its address is answered as host:port.
func Reserve(t testing.TB, host string) string {
	t.Helper()
	r, err := Take(host)
	if err != nil {
		t.Fatalf("reserve a port: %v", err)
	}
	t.Cleanup(r.Release)
	return r.Addr
}

// bindable reports whether addr can be bound now, for TCP and for UDP (a
// reservation serves either).
func bindable(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	pc.Close()
	return nil
}
