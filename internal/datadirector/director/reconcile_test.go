package director

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// hangSink is a consumer that stopped reading: Send blocks until the feed
// stops, then stays stuck for hang more, as a write does until its
// deadline.
type hangSink struct {
	inSend *atomic.Int32
	hang   time.Duration
}

func (s *hangSink) Send(ctx context.Context, _ []*nfcopy.Copy) error {
	s.inSend.Add(1)
	defer s.inSend.Add(-1)
	<-ctx.Done()
	time.Sleep(s.hang)
	return ctx.Err()
}

func (s *hangSink) Close() error { return nil }

// TestStatusWhileAChangeStopsHungFeeds: a reconcile that stops twenty
// feeds whose consumers hang takes seconds; a status read of another feed
// meanwhile is answered at once, and the twenty stop together, not one
// after another.
func TestStatusWhileAChangeStopsHungFeeds(t *testing.T) {
	const hung, hang = 20, 2 * time.Second
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	var inSend atomic.Int32
	h := newHarness(t, b, func(c *Config) {
		next := c.NewSink
		c.NewSink = func(spec *FeedSpec) (Sink, error) {
			if strings.HasPrefix(spec.Name, "hung-") {
				return &hangSink{inSend: &inSend, hang: hang}, nil
			}
			return next(spec)
		}
	})
	watched := FeedSpec{Name: "watched", Type: TypeSynthetic, Sources: []string{"NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}}
	specs := []FeedSpec{watched}
	for i := range hung {
		specs = append(specs, FeedSpec{Name: fmt.Sprintf("hung-%02d", i), Type: TypeSynthetic, Sources: []string{"SCP"},
			SyntheticSpec: SyntheticSpec{Endpoint: "127.0.0.1:9"}})
	}
	h.apply(specs...)
	produce(t, producer(t, b), "c", 0, 300, 0)
	h.waitDelivered("watched", 0, 20*time.Second)
	testkit.WaitForState(t, 20*time.Second, "every hung feed stuck in Send", func() (bool, string) {
		n := inSend.Load()
		return n == hung, fmt.Sprintf("%d of %d in Send", n, hung)
	})

	applied := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := h.m.Apply(ctx, []FeedSpec{watched}); err != nil {
			t.Errorf("apply: %v", err)
		}
		applied <- time.Since(start)
	}()
	var reads int
	var slowest, slowestAll time.Duration
	var took time.Duration
	for took == 0 {
		start := time.Now()
		st, ok := h.m.Status("watched")
		d := time.Since(start)
		all := h.m.Statuses()
		if !ok || st.State == "" || len(all) == 0 {
			t.Fatalf("status of watched during the change: %v %+v (%d feeds)", ok, st, len(all))
		}
		reads++
		slowest = max(slowest, d)
		slowestAll = max(slowestAll, time.Since(start)-d)
		select {
		case took = <-applied:
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Logf("the change took %s; %d status reads meanwhile, the slowest %s (of every feed: %s)", took, reads, slowest, slowestAll)
	if slowest > 50*time.Millisecond {
		t.Errorf("a status read during the change took %s, want ≤ 50ms", slowest)
	}
	if slowestAll > time.Second {
		t.Errorf("reading every feed's status during the change took %s", slowestAll)
	}
	if reads < 20 {
		t.Errorf("only %d status reads during a change of %s: it did not wait on the hung feeds", reads, took)
	}
	if took > hung*hang/4 {
		t.Errorf("stopping %d hung feeds took %s: one after another, not together", hung, took)
	}
	if n := len(h.m.Statuses()); n != 1 {
		t.Errorf("%d feeds after the change, want 1", n)
	}
	if n := inSend.Load(); n != 0 {
		t.Errorf("%d hung feeds still in Send after the change", n)
	}
}
