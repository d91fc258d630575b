// Package site is two-site redundancy: two signalbox sites, each with its
// own Kafka and config store, that carry each other's copies and feeds.
// Each site mirrors the copies NFs produce into its NF topics to the peer's
// Kafka (mirror.go), into topics named for the origin site ("east.SCP"),
// partition for partition, each copy keeping its key, value, headers and
// timestamp and gaining its origin offset; so both sites hold every copy,
// and a feed at either site reads its NF topics and the peer's mirrored
// ones. A feed runs at one site, its owner; the pair (pair.go) mirrors the
// owner's feed specs into the peer's store, keeps the peer's consumer
// groups where the owner's feeds have delivered (translated through the
// mirror's offset maps), and runs the peer's feeds when the peer has not
// answered for the takeover time, until it is back.
package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

// Record headers the mirror adds to each copy it mirrors.
const (
	HeaderSite   = "signalbox-site"          // the origin site's name
	HeaderOrigin = "signalbox-origin-offset" // the copy's offset in the origin partition
)

// MirroredTopic is where a site's copies of topic are mirrored to at its peer.
func MirroredTopic(site, topic string) string { return site + "." + topic }

// mirrorGroup is the consumer group of a site's mirror, in its own Kafka: the
// nodes of a site share the partitions to mirror. It commits nothing: where
// a partition goes on is read from the peer's topic (resume).
func mirrorGroup(peer string) string { return "signalbox-site-mirror-" + peer }

// flushTimeout bounds the wait for the peer to acknowledge a poll's copies;
// past it the mirror starts again (the peer's Kafka is down, say).
const flushTimeout = 30 * time.Second

// flushEvery is how often the mirror waits for the peer's acknowledgements
// and lets a rebalance of its group go on.
const flushEvery = 100 * time.Millisecond

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	Site       string              // this site
	Peer       string              // the peer site
	Local      broker.ClientConfig // this site's Kafka
	Remote     broker.ClientConfig // the peer's Kafka
	Topics     []broker.TopicSpec  // this site's NF topics, mirrored
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Mirror copies this site's NF topics into the peer's Kafka, and keeps the
// offset maps the pair translates feed positions with.
type Mirror struct {
	cfg  MirrorConfig
	log  *slog.Logger
	mu   sync.Mutex
	maps map[topicPart]*offsetMap
	kick chan struct{} // Kick: try again now

	copies  *prometheus.CounterVec
	errs    prometheus.Counter
	running prometheus.Gauge
	lastErr error
}

type topicPart struct {
	topic string
	part  int32
}

// NewMirror makes a mirror; Run runs it.
func NewMirror(cfg MirrorConfig) *Mirror {
	m := &Mirror{cfg: cfg, log: cfg.Logger, maps: map[topicPart]*offsetMap{}, kick: make(chan struct{}, 1),
		copies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_site_mirrored_copies_total",
			Help: "Copies of this site's NF topics mirrored into the peer site's Kafka, by topic."}, []string{"topic"}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_site_mirror_errors_total",
			Help: "Times the mirror to the peer site's Kafka failed and started again (peer unreachable, a produce refused, partition counts that differ)."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_site_mirror_up",
			Help: "1 while this node mirrors copies into the peer site's Kafka."}),
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(m.copies, m.errs, m.running)
	}
	return m
}

// Run mirrors until ctx ends, starting again after a failure (the peer's
// Kafka down, say) from where the peer's topics end.
func (m *Mirror) Run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := m.run(ctx)
		m.running.Set(0)
		if ctx.Err() != nil {
			return
		}
		m.errs.Inc()
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		m.log.Warn("site mirror stopped; starting again", "peer", m.cfg.Peer, "err", err, "in", backoff)
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff = min(2*backoff, 30*time.Second)
		case <-m.kick:
			backoff = time.Second
		}
	}
}

// Kick makes a mirror waiting to start again after a failure start now: the
// peer site is back.
func (m *Mirror) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// LastError is the mirror's last failure, nil while none.
func (m *Mirror) LastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

func (m *Mirror) run(ctx context.Context) error {
	// No record delivery timeout: franz-go measures it from a record's
	// timestamp, which is the NF's, so a backlog would time out at once.
	// A flush that does not end in flushTimeout fails the run instead.
	if err := m.checkTopics(ctx); err != nil {
		return err
	}
	// A client of its own after the check: one that asked for a topic
	// before it was made would wait out its metadata's age (5 s) to see it.
	remote, err := m.cfg.Remote.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer remote.Close()
	names := make([]string, len(m.cfg.Topics))
	for i, t := range m.cfg.Topics {
		names[i] = t.Name
	}
	var rebalancing atomic.Bool // a rebalance waits for AllowRebalance
	local, err := m.cfg.Local.NewClient(
		kgo.ConsumerGroup(mirrorGroup(m.cfg.Peer)),
		kgo.ConsumeTopics(names...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { rebalancing.Store(true) }),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			return m.resume(ctx, offs)
		}),
	)
	if err != nil {
		return err
	}
	defer local.Close()
	m.running.Set(1)
	m.mu.Lock()
	m.lastErr = nil
	m.mu.Unlock()
	m.log.Info("site mirror running", "peer", m.cfg.Peer, "topics", names)

	var (
		pmu     sync.Mutex
		failure error
	)
	counted := make(map[string]prometheus.Counter, len(names))
	for _, n := range names {
		counted[n] = m.copies.WithLabelValues(n)
	}
	lastFlush := time.Now()
	for {
		// A poll ends by flushEvery even when nothing comes, so that a
		// rebalance waiting for it goes on.
		pctx, pcancel := context.WithTimeout(ctx, flushEvery)
		fs := local.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			local.AllowRebalance() // or Close waits for it, leaving the group
			return nil
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			local.AllowRebalance()
			return fmt.Errorf("read %s: %w", m.cfg.Site, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			om := m.offsetMap(r.Topic, r.Partition)
			origin, c := r.Offset, counted[r.Topic]
			out := &kgo.Record{
				Topic:     MirroredTopic(m.cfg.Site, r.Topic),
				Partition: r.Partition,
				Key:       r.Key,
				Value:     r.Value,
				Timestamp: r.Timestamp,
				Headers: append(r.Headers[:len(r.Headers):len(r.Headers)],
					kgo.RecordHeader{Key: HeaderSite, Value: []byte(m.cfg.Site)},
					kgo.RecordHeader{Key: HeaderOrigin, Value: strconv.AppendInt(nil, origin, 10)}),
			}
			remote.Produce(ctx, out, func(pr *kgo.Record, err error) {
				if err != nil {
					pmu.Lock()
					if failure == nil {
						failure = err
					}
					pmu.Unlock()
					return
				}
				om.add(origin, pr.Offset)
				c.Inc()
			})
		})
		// Partitions move only once everything produced has landed:
		// whoever mirrors them next reads the peer's topic to go on. A
		// rebalance waits for that at most flushEvery (the producer's
		// buffer bounds what is in flight meanwhile).
		if !rebalancing.Load() && time.Since(lastFlush) < flushEvery {
			continue
		}
		fctx, fcancel := context.WithTimeout(ctx, flushTimeout)
		ferr := remote.Flush(fctx)
		fcancel()
		pmu.Lock()
		perr := failure
		pmu.Unlock()
		rebalancing.Store(false)
		local.AllowRebalance()
		lastFlush = time.Now()
		switch {
		case perr != nil:
			return fmt.Errorf("produce to %s: %w", m.cfg.Peer, perr)
		case ctx.Err() != nil:
			return nil
		case ferr != nil:
			return fmt.Errorf("produce to %s: not acknowledged in %s: %w", m.cfg.Peer, flushTimeout, ferr)
		}
	}
}

// checkTopics makes the mirrored topics in the peer's Kafka, partition for
// partition as here, and refuses to run where one exists with another count:
// a copy must land on the partition of its origin for the positions to map.
func (m *Mirror) checkTopics(ctx context.Context) error {
	remote, err := m.cfg.Remote.NewClient()
	if err != nil {
		return err
	}
	defer remote.Close()
	want := make([]broker.TopicSpec, len(m.cfg.Topics))
	names := make([]string, len(m.cfg.Topics))
	for i, t := range m.cfg.Topics {
		want[i] = broker.TopicSpec{Name: MirroredTopic(m.cfg.Site, t.Name), Partitions: t.Partitions}
		names[i] = want[i].Name
	}
	if err := broker.EnsureTopics(ctx, remote, want, true); err != nil {
		return fmt.Errorf("peer %s: %w", m.cfg.Peer, err)
	}
	have, err := broker.PartitionCounts(ctx, remote, names)
	if err != nil {
		return fmt.Errorf("peer %s: %w", m.cfg.Peer, err)
	}
	for _, w := range want {
		if n := have[w.Name]; n != w.Partitions {
			return fmt.Errorf("peer %s: topic %s has %d partitions, this site's %d: they must be the same", m.cfg.Peer, w.Name, n, w.Partitions)
		}
	}
	return nil
}

// resume positions each partition this node was given after the last copy
// the peer's topic holds (its origin offset header), and at the start of the
// partition where the peer has none.
func (m *Mirror) resume(ctx context.Context, offs map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	out := make(map[string]map[int32]kgo.Offset, len(offs))
	for t, parts := range offs {
		rt := MirroredTopic(m.cfg.Site, t)
		out[t] = make(map[int32]kgo.Offset, len(parts))
		for p := range parts {
			start, end, err := m.bounds(ctx, rt, p)
			if err != nil {
				return nil, fmt.Errorf("peer %s: read where the mirror stopped: %w", m.cfg.Peer, err)
			}
			at := kgo.NewOffset().AtStart()
			if end > start {
				origin, err := m.originAt(ctx, rt, p, end-1)
				if err != nil {
					return nil, fmt.Errorf("peer %s: read where the mirror stopped: %w (is the topic written by something else than this site's mirror?)", m.cfg.Peer, err)
				}
				m.offsetMap(t, p).add(origin, end-1)
				at = kgo.NewOffset().At(origin + 1).WithEpoch(-1)
			}
			out[t][p] = at
		}
	}
	m.log.Info("site mirror positioned", "peer", m.cfg.Peer, "topics", len(out))
	return out, nil
}

// originOffset reads a mirrored copy's origin offset header.
func originOffset(r *kgo.Record) (int64, bool) {
	for _, h := range r.Headers {
		if h.Key == HeaderOrigin {
			n, err := strconv.ParseInt(string(h.Value), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func (m *Mirror) offsetMap(topic string, part int32) *offsetMap {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := topicPart{topic, part}
	om := m.maps[k]
	if om == nil {
		om = &offsetMap{}
		m.maps[k] = om
	}
	return om
}
