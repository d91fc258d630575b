package calllog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit"
)

func openStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func rec(i int) store.CallRecord {
	return store.CallRecord{Policy: "default", Calling: fmt.Sprintf("+4930%06d", i), Called: "+4940123",
		Decision: "permit", Step: "default", LatencyMicros: 50, Client: "10.0.0.1"}
}

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// run starts l.Run and returns a stop function that cancels it and waits.
func run(t testing.TB, l *Log) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
	}
}

func TestRecordsReachStore(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		count int
	}{
		{"by timer", Config{BatchSize: 1000, FlushInterval: 20 * time.Millisecond}, 7},
		{"by count", Config{BatchSize: 50, FlushInterval: time.Hour}, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t)
			reg := prometheus.NewRegistry()
			l := New(st, c.cfg, reg, nil)
			stop := run(t, l)
			defer stop()
			before := time.Now()
			// By count, each full batch must go out without the timer. A
			// batch is due when the queue reaches BatchSize; what is left
			// of a partial take waits for the timer by design, so the
			// batches are recorded one at a time.
			step := c.count
			if c.cfg.FlushInterval == time.Hour {
				step = c.cfg.BatchSize
			}
			for i := 0; i < c.count; i += step {
				for j := i; j < min(c.count, i+step); j++ {
					l.Record(rec(j))
				}
				n := float64(min(c.count, i+step))
				testkit.WaitFor(t, 20*time.Second, "records in store", func() bool { return metric(t, reg, "signalbox_calllog_written_total") == n })
			}
			got, err := l.Search(context.Background(), store.CallQuery{Limit: 10000})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.count {
				t.Fatalf("store holds %d records, want %d", len(got), c.count)
			}
			if got[0].Time.Before(before.Truncate(time.Microsecond)) || got[0].Policy != "default" {
				t.Errorf("record not stamped or stored right: %+v", got[0])
			}
			one, _ := l.Search(context.Background(), store.CallQuery{Number: "+4930000003"})
			if len(one) != 1 {
				t.Errorf("search by number: %d records", len(one))
			}
			if q := metric(t, reg, "signalbox_calllog_queue_length"); q != 0 {
				t.Errorf("queue length %v after flush", q)
			}
		})
	}
}

// A full queue drops and counts, and Record never waits for the writer.
func TestFullQueueDrops(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	l := New(st, Config{QueueSize: 100}, reg, nil) // not running: nothing drains
	const n = 200_000
	r := rec(1)
	// A Record that waited for the writer would never return here (nothing
	// drains); its cost is BenchmarkRecord's.
	for range n {
		l.Record(r)
	}
	if got := metric(t, reg, "signalbox_calllog_dropped_total"); got != n-100 {
		t.Errorf("dropped = %v, want %d", got, n-100)
	}
	if got := metric(t, reg, "signalbox_calllog_queue_length"); got != 100 {
		t.Errorf("queue length = %v, want 100", got)
	}
}

func TestFlushOnShutdown(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	// Neither count nor timer would flush these: only shutdown does.
	l := New(st, Config{BatchSize: 2000, FlushInterval: time.Hour, QueueSize: 100_000, ShutdownTimeout: time.Minute}, reg, nil)
	stop := run(t, l)
	const n = 5_500
	for i := range n {
		l.Record(rec(i))
	}
	stop()
	got, err := st.SearchCalls(context.Background(), store.CallQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatal("nothing written at shutdown")
	}
	if w := metric(t, reg, "signalbox_calllog_written_total"); w != n {
		t.Errorf("written = %v, want %d", w, n)
	}
}

func TestWriteErrorsCounted(t *testing.T) {
	st := openStore(t)
	st.Close() // every write now fails
	reg := prometheus.NewRegistry()
	var logs strings.Builder
	l := New(st, Config{FlushInterval: 10 * time.Millisecond}, reg, slogTo(&logs))
	stop := run(t, l)
	for i := range 3 {
		l.Record(rec(i))
	}
	testkit.WaitFor(t, 20*time.Second, "write error", func() bool { return metric(t, reg, "signalbox_calllog_write_errors_total") >= 1 })
	stop()
	if d := metric(t, reg, "signalbox_calllog_dropped_total"); d != 3 {
		t.Errorf("dropped = %v, want 3", d)
	}
	if w := metric(t, reg, "signalbox_calllog_written_total"); w != 0 {
		t.Errorf("written = %v, want 0", w)
	}
	if !strings.Contains(logs.String(), "call log write failed") {
		t.Errorf("no error logged: %s", logs.String())
	}
}

func TestPruning(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	var old []store.CallRecord
	for i := range 50 {
		r := rec(i)
		r.Time = now.Add(-10*24*time.Hour - time.Duration(i)*time.Minute)
		old = append(old, r)
	}
	for i := range 30 {
		r := rec(100 + i)
		r.Time = now.Add(-time.Duration(i) * time.Second)
		old = append(old, r)
	}
	if err := st.InsertCalls(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	l := New(st, Config{MaxAge: 7 * 24 * time.Hour, MaxRows: 20, PruneInterval: 20 * time.Millisecond}, reg, nil)
	stop := run(t, l)
	defer stop()
	testkit.WaitFor(t, 20*time.Second, "pruning", func() bool { return metric(t, reg, "signalbox_calllog_pruned_total") == 60 })
	got, _ := st.SearchCalls(context.Background(), store.CallQuery{Limit: 1000})
	if len(got) != 20 || got[0].Calling != rec(100).Calling {
		t.Errorf("kept %d records, newest %+v; want the newest 20", len(got), got[0])
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	want := Config{QueueSize: 65536, BatchSize: 5000, FlushInterval: time.Second, MaxAge: 7 * 24 * time.Hour,
		MaxRows: 10_000_000, PruneInterval: time.Minute, ShutdownTimeout: 5 * time.Second}
	if c != want {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
	reg := prometheus.NewRegistry()
	New(openStore(t), Config{}, reg, nil)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 5 {
		t.Errorf("registered %d metrics, %v; want 5", n, err)
	}
}

func BenchmarkRecord(b *testing.B) {
	for _, full := range []bool{false, true} {
		b.Run(fmt.Sprintf("full=%v", full), func(b *testing.B) {
			l := New(openStore(b), Config{QueueSize: 65536}, nil, nil)
			if full {
				for range 65536 {
					l.Record(rec(0))
				}
			} else {
				// The writer keeps up, as in service.
				b.Cleanup(run(b, l))
			}
			r := rec(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l.Record(r)
			}
		})
	}
}

// TestSearchSeesWhatWasJustRecorded: a decision recorded just before a
// search is in it, though neither the batch size nor the flush interval
// would have written it yet.
func TestSearchSeesWhatWasJustRecorded(t *testing.T) {
	st := openStore(t)
	l := New(st, Config{BatchSize: 2000, FlushInterval: time.Hour, QueueSize: 100_000}, prometheus.NewRegistry(), nil)
	stop := run(t, l)
	defer stop()
	l.Record(rec(7))
	got, err := l.Search(context.Background(), store.CallQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Calling != rec(7).Calling {
		t.Fatalf("search right after the call: %+v", got)
	}
}
