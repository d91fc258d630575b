package director

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// pipeSink is the receiver's line protocol as a PipelinedSink: Write does not
// wait for the receiver's "ok"; a reader goroutine counts them, and Confirmed
// compares. Tickets count batches over all connections, like the synthetic
// sink's count bytes.
type pipeSink struct {
	addr string

	mu          sync.Mutex
	conn        net.Conn
	dead        chan struct{}
	connBase    uint64 // batches written on earlier connections
	written     uint64 // on this connection
	acked       uint64 // on this connection, by the reader
	ackedBefore uint64 // on earlier connections
	buf         []byte
	writes      int
	// most batches written and not yet confirmed when a write began
	maxUnconfirmed uint64
}

var _ PipelinedSink = (*pipeSink)(nil)

func (s *pipeSink) Write(ctx context.Context, batch []*nfcopy.Copy) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		select {
		case <-s.dead:
			s.drop()
		default:
		}
	}
	if s.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return 0, err
		}
		s.conn, s.dead = c, make(chan struct{})
		go s.read(c, s.dead)
	}
	s.maxUnconfirmed = max(s.maxUnconfirmed, s.written-s.acked)
	s.buf = appendBatchFrame(s.buf[:0], batch)
	_ = s.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.conn.Write(s.buf); err != nil {
		s.drop()
		return 0, err
	}
	s.written++
	s.writes++
	return s.connBase + s.written, nil
}

func (s *pipeSink) read(c net.Conn, dead chan struct{}) {
	defer close(dead)
	br := bufio.NewReader(c)
	for {
		l, err := br.ReadString('\n')
		if err != nil || l != "ok\n" {
			return
		}
		s.mu.Lock()
		s.acked++
		s.mu.Unlock()
	}
}

// drop closes the connection; what it did not confirm never will be. s.mu is held.
func (s *pipeSink) drop() {
	if s.conn == nil {
		return
	}
	s.conn.Close()
	dead := s.dead
	s.mu.Unlock()
	<-dead
	s.mu.Lock()
	s.ackedBefore = s.connBase + s.acked
	s.connBase += s.written
	s.written, s.acked, s.conn = 0, 0, nil
}

func (s *pipeSink) Confirmed(t uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t <= s.ackedBefore {
		return true, nil
	}
	if t <= s.connBase || s.conn == nil {
		return false, errors.New("lost")
	}
	if t <= s.connBase+s.acked {
		return true, nil
	}
	select {
	case <-s.dead:
		s.drop()
		return false, errors.New("connection closed")
	default:
	}
	return false, nil
}

func (s *pipeSink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	t, err := s.Write(ctx, batch)
	for err == nil {
		var ok bool
		if ok, err = s.Confirmed(t); ok {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return err
}

func (s *pipeSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop()
	return nil
}

// TestPipelinedFeedLosesNothing runs a feed whose sink confirms apart from
// writing through a receiver outage: every copy arrives, and the feed wrote
// batches while earlier ones were still unconfirmed.
func TestPipelinedFeedLosesNothing(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	var sinks []*pipeSink
	var smu sync.Mutex
	m, err := NewManager(Config{
		Client: b.ClientConfig(), Topics: testTopics[:3], Registerer: prometheus.NewRegistry(), Logger: testLogger(t),
		LagInterval: 200 * time.Millisecond, BackoffMin: 50 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		NewSink: func(spec *FeedSpec) (Sink, error) {
			s := &pipeSink{addr: spec.Endpoint}
			smu.Lock()
			sinks = append(sinks, s)
			smu.Unlock()
			return s, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h := &harness{t: t, b: b, m: m}
	pcl := producer(t, b)
	h.apply(FeedSpec{Name: "pipe", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}})
	const n = 5000
	fin := make(chan struct{})
	go func() { defer close(fin); produce(t, pcl, "c", 0, n, 20*time.Millisecond) }()
	time.Sleep(500 * time.Millisecond)
	rcv.stop()
	testkit.WaitFor(t, 30*time.Second, "the feed to notice the outage", func() bool { return h.status("pipe").Failed > 0 })
	time.Sleep(time.Second)
	rcv.restart()
	<-fin
	testkit.WaitFor(t, 30*time.Second, "every copy after the outage", func() bool { return len(rcv.missing("c", n)) == 0 })
	h.waitDelivered("pipe", n-1, 20*time.Second)
	testkit.WaitFor(t, 30*time.Second, "lag to reach 0", func() bool { return h.status("pipe").Lag == 0 })
	st := h.status("pipe")
	if st.Retries == 0 || st.State != StateConnected {
		t.Errorf("status after outage: %+v", st)
	}
	d, tot := rcv.counts()
	var writes int
	var inFlight uint64
	smu.Lock()
	for _, s := range sinks {
		s.mu.Lock()
		writes += s.writes
		inFlight = max(inFlight, s.maxUnconfirmed)
		s.mu.Unlock()
	}
	smu.Unlock()
	t.Logf("outage: %d distinct, %d total (%d duplicates), %d failed, %d writes, at most %d batches unconfirmed", d, tot, tot-d, st.Failed, writes, inFlight)
	// At-least-once resends only what was unconfirmed when the receiver
	// went away: a few batches, never a tenth of the stream.
	if tot-d > n/10 {
		t.Errorf("%d duplicates of %d copies after one outage", tot-d, n)
	}
	if inFlight < 1 {
		t.Errorf("no batch was written while an earlier one was unconfirmed: the feed did not pipeline")
	}
}
