package testkit

import (
	"io"
	"net"
	"sync"
	"time"
)

// ClosedWithin reports whether the peer closes c within d (what it sends
// is read and dropped): a server refusing a hostile client.
func ClosedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// Trickler is a slow client's sending: after a head, one byte an
// interval on each of its connections, until the server closes it or
// Stop.
type Trickler struct {
	every time.Duration
	stop  chan struct{}
	wg    sync.WaitGroup
}

// NewTrickler trickles a byte every interval.
func NewTrickler(every time.Duration) *Trickler {
	return &Trickler{every: every, stop: make(chan struct{})}
}

// Add writes head to c, then trickles on it.
func (tr *Trickler) Add(c net.Conn, head []byte) {
	_, _ = c.Write(head)
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		tk := time.NewTicker(tr.every)
		defer tk.Stop()
		for {
			select {
			case <-tr.stop:
				return
			case <-tk.C:
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
}

// Stop ends the trickling and waits for it.
func (tr *Trickler) Stop() {
	close(tr.stop)
	tr.wg.Wait()
}
