// Package ratesync makes the call policy's rate limits hold across the
// nodes of a cluster. CUCM spreads calls over several signalbox nodes
// (primary and secondary, or a load balancer); a limit of 10 calls a
// minute must mean 10 for the cluster, not 10 per node.
//
// Every node counts its own calls as before (the call path never waits
// for anything but its own memory). Every Every, the Syncer writes the
// counts live calls changed into the shared store (PostgreSQL: an UNLOGGED
// table of per-node counts) and reads back the sum of the other nodes'
// counts and blocks for the keys they changed, which the node's limits
// then add to their own. A limit can be overshot by what the other nodes
// admit within one sync interval.
//
// When the store is slow or down the sync fails open: after StaleAfter
// without a successful sync the other nodes' counts are dropped, each node
// limits on its own counts, and the alarm is raised until a sync succeeds.
package ratesync

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/obs"
)

// Store is the shared store's side of the exchange.
type Store interface {
	SyncRateCounts(ctx context.Context, node string, push []callpolicy.LimitCount, since, now time.Time) ([]callpolicy.LimitCount, error)
	PruneRateCounts(ctx context.Context, before time.Time) (int64, error)
}

// AlarmID is the alarm raised while the limits are per node because the
// sync is failing.
const AlarmID = "rate_limit_sync"

// Config configures a Syncer. Engine, Store and Node are required.
type Config struct {
	Engine *callpolicy.Engine
	Store  Store
	Node   string // this node's name in the shared table; unique in the cluster
	// Every is the sync interval (default 100 ms); Timeout bounds one sync
	// (default Every, and at least 500 ms: on a loaded box a store round
	// trip of more than one interval is better finished than failed and
	// sent again; ticks meanwhile are skipped); StaleAfter is how long
	// without a successful sync before the other nodes' counts are dropped
	// (default 2 s).
	Every, Timeout, StaleAfter time.Duration
	Alarms                     *obs.Alarms // may be nil
	Registerer                 prometheus.Registerer
	Logger                     *slog.Logger
	now                        func() time.Time
}

// Syncer exchanges rate-limit counts with the other nodes.
type Syncer struct {
	cfg      Config
	log      *slog.Logger
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	remote   prometheus.Gauge
	// pending holds counts a failed sync could not write: merged into the
	// next push (newest per key and window wins).
	pending map[pendingKey]callpolicy.LimitCount
}

type pendingKey struct {
	policy, number string
	kind           uint8
	window         int64
}

// New returns a Syncer; Run starts it.
func New(cfg Config) *Syncer {
	if cfg.Every <= 0 {
		cfg.Every = 100 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = max(cfg.Every, 500*time.Millisecond)
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 2 * time.Second
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	s := &Syncer{cfg: cfg, log: cfg.Logger, pending: map[pendingKey]callpolicy.LimitCount{},
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_ratelimit_syncs_total",
			Help: "Exchanges of rate-limit counts with the other nodes through the shared store, by result (ok, error)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "signalbox_ratelimit_sync_seconds",
			Help: "Time of one exchange of rate-limit counts.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)}),
		remote: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_ratelimit_cluster_sync_ok",
			Help: "1 while the rate limits count the other nodes' calls, 0 while they are per node (the sync failing open)."}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.syncs, s.duration, s.remote)
	}
	return s
}

// Run syncs every Every until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	s.cfg.Engine.TrackLimits(true)
	defer s.cfg.Engine.TrackLimits(false)
	tick := time.NewTicker(s.cfg.Every)
	defer tick.Stop()
	prune := time.NewTicker(30 * time.Second)
	defer prune.Stop()
	lastOK := s.cfg.now()
	since := lastOK.Add(-time.Hour) // the first sync reads every live count
	stale := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := s.cfg.Store.PruneRateCounts(pctx, s.cfg.now()); err != nil && ctx.Err() == nil {
				s.log.Warn("pruning rate-limit counts", "err", err)
			}
			cancel()
		case <-tick.C:
			start := s.cfg.now()
			if err := s.syncOnce(ctx, since, start); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.syncs.WithLabelValues("error").Inc()
				if !stale && start.Sub(lastOK) > s.cfg.StaleAfter {
					stale = true
					s.cfg.Engine.ForgetRemoteLimits()
					s.remote.Set(0)
					s.log.Error("rate-limit sync failing: limits are per node", "err", err, "since", lastOK)
					if s.cfg.Alarms != nil {
						s.cfg.Alarms.Raise(AlarmID, s.cfg.Node, obs.Major, "rate limits are per node: the shared store has not answered the count exchange since "+lastOK.UTC().Format(time.RFC3339)+": "+err.Error())
					}
				}
				continue
			}
			s.syncs.WithLabelValues("ok").Inc()
			s.duration.Observe(s.cfg.now().Sub(start).Seconds())
			// The next read overlaps this one by a second: a row another
			// node's transaction stamped before this read but committed
			// after it is read then (its clock may also run behind ours).
			since, lastOK = start.Add(-time.Second), start
			s.remote.Set(1)
			if stale {
				stale = false
				s.log.Info("rate-limit sync back: limits count the cluster again")
				if s.cfg.Alarms != nil {
					s.cfg.Alarms.Clear(AlarmID, s.cfg.Node)
				}
			}
		}
	}
}

// syncOnce pushes this node's changed counts (with those a failed sync
// left) and applies the others'.
func (s *Syncer) syncOnce(ctx context.Context, since, now time.Time) error {
	for _, c := range s.cfg.Engine.LimitsChanged(now) {
		s.pending[pendingKey{c.Policy, c.Number, c.Kind, c.Window}] = c
	}
	push := make([]callpolicy.LimitCount, 0, len(s.pending))
	for _, c := range s.pending {
		push = append(push, c)
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	remote, err := s.cfg.Store.SyncRateCounts(sctx, s.cfg.Node, push, since, now)
	if err != nil {
		// Counts of windows that are over by now are no use to anyone.
		for k, c := range s.pending {
			if c.Window+2*c.WindowLen < now.UnixNano() && c.BlockedUntil < now.UnixNano() {
				delete(s.pending, k)
			}
		}
		return err
	}
	clear(s.pending)
	s.cfg.Engine.ApplyRemoteLimits(remote, now)
	return nil
}
