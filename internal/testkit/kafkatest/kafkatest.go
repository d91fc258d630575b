// Package kafkatest is what tests share for Kafka: the embedded broker on a
// loopback port, and a topic read from its start as a consumer reads it. It
// is apart from testkit so that tests without Kafka do not link the broker.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

// StartBroker starts the embedded broker on a loopback port (cfg.Addr
// empty) and closes it when the test ends.
func StartBroker(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// Reader reads topics from their start, in no consumer group, keeping what
// it read; it is closed when the test ends.
type Reader struct {
	t  testing.TB
	cl *kgo.Client
	// Records are every record read so far, in the order fetched.
	Records []*kgo.Record
}

// NewReader reads topics of the cluster cc names (opts add client options:
// kgo.FetchIsolationLevel(kgo.ReadCommitted()), say).
func NewReader(t testing.TB, cc broker.ClientConfig, topics []string, opts ...kgo.Opt) *Reader {
	t.Helper()
	cl, err := cc.NewClient(append([]kgo.Opt{kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &Reader{t: t, cl: cl}
}

// Until reads until done says it has what it waits for (done sees every
// record read so far) and answers the records; the test fails, naming what
// and how many records came, when timeout passes first. A fetch error fails
// it at once.
func (r *Reader) Until(timeout time.Duration, what string, done func(recs []*kgo.Record) bool) []*kgo.Record {
	r.t.Helper()
	if !r.For(timeout, done) {
		r.t.Fatalf("%s: not within %s (%d records read)", what, timeout, len(r.Records))
	}
	return r.Records
}

// For is Until that reports whether done came in time rather than failing.
func (r *Reader) For(timeout time.Duration, done func(recs []*kgo.Record) bool) bool {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done(r.Records) {
		if !time.Now().Before(deadline) {
			return false
		}
		r.poll(min(time.Until(deadline), time.Second))
	}
	return true
}

// Read reads until n records have come (in all), and answers them.
func (r *Reader) Read(n int, timeout time.Duration) []*kgo.Record {
	r.t.Helper()
	return r.Until(timeout, "read records", func(recs []*kgo.Record) bool { return len(recs) >= n })
}

// None fails the test when a record comes within wait.
func (r *Reader) None(wait time.Duration) {
	r.t.Helper()
	before := len(r.Records)
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		r.poll(time.Until(deadline))
	}
	if n := len(r.Records) - before; n > 0 {
		r.t.Fatalf("%d records more than the %d expected", n, before)
	}
}

func (r *Reader) poll(d time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), max(d, time.Millisecond))
	defer cancel()
	fs := r.cl.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if ctx.Err() == nil {
			r.t.Fatalf("fetch %s/%d: %v", topic, p, err)
		}
	})
	r.Records = append(r.Records, fs.Records()...)
}

// Keys counts the records by key.
func Keys(recs []*kgo.Record) map[string]int {
	out := make(map[string]int, len(recs))
	for _, r := range recs {
		out[string(r.Key)]++
	}
	return out
}
