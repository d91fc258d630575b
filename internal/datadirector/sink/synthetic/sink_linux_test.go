package synthetic

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestSinkResetBeforeAck: a consumer that stops reading and then resets the
// connection has not received what it never acknowledged, although the
// reset empties the sender's queue: Confirmed fails for that batch (it is
// written again), it does not report it delivered. (The sink's reader
// usually sees the reset first; connAlive covers the moment before.)
func TestSinkResetBeforeAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c.(*net.TCPConn)
		}
	}()
	s, err := New(Config{Endpoint: ln.Addr().String(), Logger: testkit.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	big := []*nfcopy.Copy{request(1, nfcopy.RequestIngress, jsonBody(60_000))}
	// Write until the consumer, reading nothing, stops acknowledging.
	var ticket uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		t2, err := s.Write(wctx, big)
		cancel()
		if err != nil {
			break // the send buffer is full too: the last ticket is unacknowledged
		}
		ticket = t2
		time.Sleep(time.Millisecond)
		if ok, err := s.Confirmed(ticket); err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the consumer acknowledged everything it did not read")
		}
	}
	c := <-accepted
	if err := c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	c.Close() // RST: the consumer drops what it had
	for time.Now().Before(deadline) {
		ok, err := s.Confirmed(ticket)
		if err != nil {
			return
		}
		if ok {
			t.Fatal("a batch the consumer never acknowledged was confirmed after the reset")
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no error after the consumer reset the connection")
}
