package ratesync

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/testkit"
)

// outage wraps the real store: while down, a sync hangs until its
// deadline, as a PostgreSQL that stopped answering does.
type outage struct {
	store.Store
	down atomic.Bool
	// synced counts each node's syncs that went through.
	mu     sync.Mutex
	synced map[string]int
}

func (o *outage) SyncRateCounts(ctx context.Context, node string, push []callpolicy.LimitCount, since, now time.Time) ([]callpolicy.LimitCount, error) {
	if o.down.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	remote, err := o.Store.SyncRateCounts(ctx, node, push, since, now)
	if err == nil {
		o.mu.Lock()
		o.synced[node]++
		o.mu.Unlock()
	}
	return remote, err
}

// exchanged waits until every node has pushed what it counted before the
// call and read what the others pushed: twice, each node syncs twice
// after the round began (its first may have started before).
func (o *outage) exchanged(t *testing.T, nodes ...string) {
	t.Helper()
	for range 2 {
		o.mu.Lock()
		from := map[string]int{}
		for _, n := range nodes {
			from[n] = o.synced[n]
		}
		o.mu.Unlock()
		testkit.WaitFor(t, 10*time.Second, "the nodes to sync", func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, n := range nodes {
				if o.synced[n] < from[n]+2 {
					return false
				}
			}
			return true
		})
	}
}

func engine(t *testing.T) *callpolicy.Engine {
	t.Helper()
	s, err := callpolicy.Compile([]callpolicy.PolicyConfig{{Policy: callpolicy.Policy{ID: "p",
		DefaultAction: callpolicy.Action{Decision: callpolicy.Permit},
		RateLimit:     &callpolicy.RateLimit{PerCalling: &callpolicy.Limit{Calls: 6, WindowSeconds: 3600}}}}})
	if err != nil {
		t.Fatal(err)
	}
	e := callpolicy.NewEngine(nil)
	e.Swap(s)
	return e
}

// TestFailOpen: two nodes count together through the store; when it hangs
// the calls are answered at once, the nodes fall back to their own counts
// and the alarm is raised; when it answers again the alarm clears.
func TestFailOpen(t *testing.T) {
	st, err := store.Open(context.Background(), store.Options{DSN: "sqlite", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := &outage{Store: st, synced: map[string]int{}}
	alarms := obs.NewAlarms(prometheus.NewRegistry())
	var engines [2]*callpolicy.Engine
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range engines {
		engines[i] = engine(t)
		s := New(Config{Engine: engines[i], Store: o, Node: string(rune('a' + i)), Every: 20 * time.Millisecond,
			StaleAfter: 200 * time.Millisecond, Alarms: alarms})
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	call := func(i int, caller string) (callpolicy.Step, time.Duration) {
		start := time.Now()
		d, _ := engines[i].Evaluate("p", &callpolicy.Call{Calling: caller, Called: "1"}, time.Now())
		return d.Step, time.Since(start)
	}
	// Counting together: three calls on each node fill the limit of six.
	testkit.WaitFor(t, 5*time.Second, "syncers running", func() bool { return len(engines[0].LimitsChanged(time.Now())) == 0 })
	for i := range 6 {
		if step, _ := call(i%2, "+1555"); step != callpolicy.StepDefault {
			t.Fatalf("call %d: %s", i, step)
		}
		o.exchanged(t, "a", "b")
	}
	if step, _ := call(0, "+1555"); step != callpolicy.StepRateLimit {
		t.Fatalf("the seventh call in the cluster: %s, want rate_limit", step)
	}

	// The store stops answering: calls are not slowed, and once the sync is
	// stale each node limits on its own count.
	o.down.Store(true)
	for i := range 3 {
		if step, took := call(1, "+1666"); step != callpolicy.StepDefault || took > 5*time.Millisecond {
			t.Fatalf("during the outage, call %d: %s in %v", i, step, took)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "alarm raised by both nodes", func() bool { return len(alarms.Active()) == 2 })
	for _, a := range alarms.Active() {
		if a.Kind != AlarmID || a.Severity != obs.Major {
			t.Errorf("alarm %+v", a)
		}
	}
	// Node 0 never saw +1666: its own count is empty, so it admits six.
	for i := range 6 {
		if step, _ := call(0, "+1666"); step != callpolicy.StepDefault {
			t.Fatalf("per-node limit, call %d: %s", i, step)
		}
	}
	if step, _ := call(0, "+1666"); step != callpolicy.StepRateLimit {
		t.Fatalf("per-node limit: the seventh call on node 0: %s", step)
	}

	o.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "alarm cleared", func() bool { return len(alarms.Active()) == 0 })
}

func TestSyncErrorsKeepCounts(t *testing.T) {
	s := New(Config{Engine: engine(t), Store: failing{}, Node: "a"})
	s.cfg.Engine.TrackLimits(true)
	s.cfg.Engine.Evaluate("p", &callpolicy.Call{Calling: "1"}, time.Now())
	now := time.Now()
	if err := s.syncOnce(context.Background(), now, now); err == nil || len(s.pending) != 1 {
		t.Fatalf("a failed sync keeps its counts for the next: %v %d", err, len(s.pending))
	}
}

type failing struct{}

func (failing) SyncRateCounts(context.Context, string, []callpolicy.LimitCount, time.Time, time.Time) ([]callpolicy.LimitCount, error) {
	return nil, errors.New("connection refused")
}
func (failing) PruneRateCounts(context.Context, time.Time) (int64, error) { return 0, nil }
