package director

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// Config configures a Manager.
type Config struct {
	Client   broker.ClientConfig
	Topics   []broker.TopicSpec // source topics (NF types); the DLQ topic may be listed too
	DLQTopic string             // default broker.DLQTopic
	// RecordStore, if set, keeps every transaction record the xdr feeds
	// make (xdrstore), for search: the records and their JSON.
	RecordStore interface {
		Append(recs []xdr.Record, raws [][]byte)
	}
	// CallsTopic is the topic of the CURRI call records (callstream); a
	// feed whose one source it is carries call records instead of copies
	// (http2, kafka and JSON-lines file feeds). Empty: no such feeds.
	CallsTopic string
	// MaskNumbers hides all but this many last digits of the GPSIs in
	// the xdr feeds' records (and so in the record store); 0: whole.
	MaskNumbers int
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
	GroupPrefix string // default "signalbox-feed-"
	// Node names this node among those running the same feeds: an
	// exactly-once feed's transactional id is its name and the node's, so a
	// node that restarts fences its earlier self's open transaction.
	Node string
	// CreateTopics lets kafka feeds create their output topic in the
	// director's own Kafka when it is missing (serve -kafka-create-topics).
	CreateTopics bool
	// NewSink overrides how a feed's sink is built (default: synthetic,
	// http2 or kafka from the spec).
	NewSink func(spec *FeedSpec) (Sink, error)

	// Sharing is how copy feeds share their sources' taps.
	Sharing

	// SessionTimeout is how long the group keeps a node's partitions when
	// it stops heartbeating (paused, cut off, killed) before it gives them
	// to the others; default 45s, Kafka's. A tap's commits into its feeds'
	// groups must land within half of it after proving its membership.
	SessionTimeout time.Duration

	MaxBatch    int           // records per poll and per Send; default 2000
	LagInterval time.Duration // how often lag is refreshed; default 5s
	BackoffMin  time.Duration // first retry delay after a failed Send; default 100ms
	BackoffMax  time.Duration // retry delay cap; default 10s
}

// Sharing is how the copy feeds of the same sources share one reader, their
// tap (tap.go).
type Sharing struct {
	// SoloReads gives every feed its own consumer: no tap is shared by
	// the copy feeds of the same sources (serve -feed-solo-reads).
	SoloReads bool
	// CaptureBuffer bounds what a live capture holds for a slow client
	// (0: director.CaptureBuffer).
	CaptureBuffer int64
	// TapStall is how long a tap waits for a member feed to take a batch
	// before it drops the feed to read on its own; default 2s.
	TapStall time.Duration
	// RejoinAfter and RejoinLag: a feed the tap dropped reads on its own
	// for at least RejoinAfter (default 30s), then goes back to the tap
	// once it is connected and at most RejoinLag copies behind (default
	// 10,000).
	RejoinAfter time.Duration
	RejoinLag   int
}

// Feed states.
const (
	StateStarting     = "starting"
	StateConnected    = "connected"
	StateDisconnected = "disconnected"
	StateStopped      = "stopped"
	// StateStandby is a feed this node keeps the position of while another
	// site runs it (two-site redundancy, internal/datadirector/site).
	StateStandby = "standby"
	StateError   = "error"
)

// FeedStatus is a feed's runtime state and counters since it (re)started.
// Its parts are embedded: the JSON is flat.
type FeedStatus struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	State string `json:"state"`
	FeedCounts
	Lag             int64     `json:"lag"`
	LostToRetention uint64    `json:"lost_to_retention"`
	LastError       string    `json:"last_error,omitempty"`
	LastErrorAt     time.Time `json:"last_error_at,omitzero"`
	FeedLatency
	Since time.Time `json:"since"`
	// Filters: copies (xdr feeds: records) passed and dropped. xdr feeds:
	// records delivered and transactions waiting in the correlator.
	Matched     uint64 `json:"matched"`
	FilteredOut uint64 `json:"filtered_out"`
	Records     uint64 `json:"records,omitempty"`
	// Reader is how the feed reads its sources: "shared" (its sources'
	// tap, with the other copy feeds of the same sources) or "own" (its
	// own consumer: xdr feeds, sharing off, or dropped by the tap for
	// falling behind until it catches up).
	Reader  string `json:"reader,omitempty"`
	Pending int64  `json:"pending,omitempty"`
}

// FeedCounts are what a feed's sink confirmed and what the feed did with
// the copies it read (FeedStatus).
type FeedCounts struct {
	Delivered      uint64 `json:"delivered"`
	DeliveredBytes uint64 `json:"delivered_bytes"`
	Failed         uint64 `json:"failed"`
	Retries        uint64 `json:"retries"`
	Redelivered    uint64 `json:"redelivered"`
	Invalid        uint64 `json:"invalid"`
	Undeliverable  uint64 `json:"undeliverable"`      // copies the sink can never deliver, sent to the dead-letter topic
	Incomplete     uint64 `json:"incomplete_skipped"` // copies lacking what the feed's packets or records need, skipped
	Reordered      uint64 `json:"reordered"`          // responses moved after their request (sequencing)
}

// FeedLatency is a feed's end-to-end latency over the last minute, in
// seconds (FeedStatus).
type FeedLatency struct {
	LatencyP50 float64 `json:"latency_p50"`
	LatencyP95 float64 `json:"latency_p95"`
	LatencyP99 float64 `json:"latency_p99"`
	LatencyMax float64 `json:"latency_max"`
}

// Manager runs the feeds of this node: it starts, reconfigures and stops
// them as Apply is given specs, shares a tap among the copy feeds of one
// source set, and keeps every feed's offsets in the feed's own consumer
// group.
type Manager struct {
	cfg         Config
	log         *slog.Logger
	m           *metrics
	admin       *kgo.Client
	adm         *kadm.Client
	sources     map[string]bool
	sourceNames []string
	invalidSeen invalidOnce // undecodable records counted and dead-lettered once

	base   context.Context
	cancel context.CancelFunc

	// applyMu makes reconciles (ApplyPlans) and the shutdown one at a
	// time. It is held across the network — a reconcile stops feeds,
	// which commit, and positions consumer groups — so nothing but
	// another reconcile ever waits on it: status reads, lag, metrics and
	// the feeds themselves read feeds.
	applyMu sync.Mutex
	// feeds is the set of feeds, by name, as the last reconcile left it:
	// replaced whole, never changed in place, read without a lock.
	feeds atomic.Pointer[map[string]*feed]
	// rmu guards what the feeds' goroutines share across their
	// incarnations: ledgers, clocks and taps. Never held while waiting on
	// anything but a tap's state loop.
	rmu sync.Mutex
	// ledgers are the feeds' offsets on this node (ledger.go), by feed
	// name: kept across a feed's incarnations, which share what was
	// delivered, to count redeliveries.
	ledgers map[string]*ledger
	// clocks are the correlating stages' clocks by the name of their
	// re-key stage, told of its group's rebalances (upstreamRebalance).
	clocks map[string]map[*pausingClock]bool

	// taps are the shared readers, by source set (tap.go).
	taps map[string]*tap

	// storers is, by NF type, the xdr feed whose records of transactions
	// that type saw first go to Config.RecordStore (recordStorers).
	storers atomic.Pointer[map[string]string]
}

type tp struct {
	topic     string
	partition int32
}

// NewManager checks the configuration and connects an admin client (lazily:
// Kafka need not be up yet).
func NewManager(cfg Config) (*Manager, error) {
	if cfg.DLQTopic == "" {
		cfg.DLQTopic = broker.DLQTopic
	}
	if cfg.GroupPrefix == "" {
		cfg.GroupPrefix = "signalbox-feed-"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 2000
	}
	if cfg.TapStall <= 0 {
		cfg.TapStall = 2 * time.Second
	}
	if cfg.RejoinAfter <= 0 {
		cfg.RejoinAfter = 30 * time.Second
	}
	if cfg.RejoinLag <= 0 {
		cfg.RejoinLag = 10_000
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 45 * time.Second
	}
	if cfg.LagInterval <= 0 {
		cfg.LagInterval = 5 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 10 * time.Second
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("director: no source topics")
	}
	mt, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	admin, err := cfg.Client.NewClient()
	if err != nil {
		return nil, fmt.Errorf("director: %w", err)
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger.With("component", "director"), m: mt,
		admin: admin, adm: kadm.NewClient(admin),
		sources: map[string]bool{}, ledgers: map[string]*ledger{}, clocks: map[string]map[*pausingClock]bool{},
		taps: map[string]*tap{},
	}
	for _, t := range cfg.Topics {
		if t.Name != cfg.DLQTopic {
			m.sources[t.Name] = true
			m.sourceNames = append(m.sourceNames, t.Name)
		}
	}
	m.feeds.Store(&map[string]*feed{})
	m.base, m.cancel = context.WithCancel(context.Background())
	if m.cfg.NewSink == nil {
		m.cfg.NewSink = m.defaultSink
	}
	return m, nil
}

// Run refreshes lag and latency windows until ctx ends, then stops every
// feed (committing what was delivered) and closes the admin client.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.LagInterval)
	defer t.Stop()
	rotate := time.NewTicker(10 * time.Second)
	defer rotate.Stop()
	for {
		select {
		case <-ctx.Done():
			m.shutdown()
			return nil
		case <-t.C:
			m.refreshLag(ctx)
		case <-rotate.C:
			for _, f := range m.feedSet() {
				f.rotate()
			}
		}
	}
}

// feedSet is the feeds as the last reconcile left them; the caller must
// not change the map.
func (m *Manager) feedSet() map[string]*feed { return *m.feeds.Load() }

// shutdown stops every feed, after a reconcile in progress.
func (m *Manager) shutdown() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	stopAll(slices.Collect(maps.Values(m.feedSet())))
	m.cancel()
	m.admin.Close()
}

// stopAll stops feeds at once, each committing what it delivered, and
// returns when every one has stopped: a change that stops twenty feeds
// whose consumers hang waits for the slowest, not for the sum.
func stopAll(feeds []*feed) {
	var wg sync.WaitGroup
	for _, f := range feeds {
		wg.Go(f.stop)
	}
	wg.Wait()
}

func (m *Manager) refreshLag(ctx context.Context) {
	feeds := m.feedSet()
	groups := make([]string, 0, len(feeds))
	byGroup := map[string]*feed{}
	for _, f := range feeds {
		if f.running() {
			groups = append(groups, f.group)
			byGroup[f.group] = f
		}
	}
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.LagInterval)
	defer cancel()
	lags, err := m.adm.Lag(ctx, groups...)
	if err != nil {
		m.log.Warn("feed lag", "err", err)
		return
	}
	lags.Each(func(l kadm.DescribedGroupLag) {
		f := byGroup[l.Group]
		if f == nil || l.Error() != nil {
			return
		}
		total := l.Lag.Total()
		f.lag.Store(total)
		f.mLag.Set(float64(total))
	})
}

// Apply reconciles the running feeds with specs, run as they are (Plans).
func (m *Manager) Apply(ctx context.Context, specs []FeedSpec) error {
	return m.ApplyPlans(ctx, Plans(specs))
}

// ApplyPlans reconciles the running feeds with plans: starts new ones,
// restarts changed ones, stops removed or disabled ones. Invalid specs are
// reported (and shown in Status with state error); the others still apply.
//
// The new set of feeds is built first and replaces the old at once, so a
// status read never waits on a reconcile: a feed being restarted reads as
// its new incarnation (starting) while the old one stops. The feeds that
// go are stopped together, then the new ones are positioned and started;
// a restarted feed's new incarnation starts only once its old one has
// committed and stopped.
func (m *Manager) ApplyPlans(ctx context.Context, plans []Plan) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	specs := m.expand(ctx, plans)
	want := map[string]runPlan{}
	for _, s := range specs {
		want[s.Name] = s
	}
	if m.cfg.RecordStore != nil {
		st := m.recordStorers(specs)
		m.storers.Store(&st)
	}
	cur := m.feedSet()
	next := make(map[string]*feed, len(specs))
	var old, removed []*feed
	for name, f := range cur {
		if s, ok := want[name]; ok && s.key() == f.key {
			next[name] = f
			continue
		} else if !ok {
			removed = append(removed, f)
		}
		old = append(old, f)
	}
	var errs []error
	var fresh []*feed
	for _, s := range specs {
		if _, ok := next[s.Name]; ok {
			continue
		}
		f := m.newFeed(s)
		next[s.Name] = f
		if err := m.validate(&f.spec.FeedSpec, f.spec.stage == stageCorrelate); err != nil {
			f.setState(StateError)
			f.setErr(err)
			m.m.forget(s.Name) // no series for a feed that never runs (its name may be junk)
			errs = append(errs, fmt.Errorf("feed %q: %w", s.Name, err))
			continue
		}
		m.m.declare(&f.spec.FeedSpec)
		if !s.running() {
			f.setState(map[bool]string{false: StateStopped, true: StateStandby}[s.standby])
			continue
		}
		fresh = append(fresh, f)
	}
	m.feeds.Store(&next)

	stopAll(old)
	for _, f := range removed {
		name := f.spec.Name
		m.m.forget(name)
		m.rmu.Lock()
		delete(m.ledgers, name)
		m.rmu.Unlock()
		// The group goes too, so a later feed of the same name starts
		// fresh; best effort (Prepare repositions anyway).
		if _, err := m.adm.DeleteGroups(ctx, f.group); err != nil {
			m.log.Warn("feed removed: delete consumer group", "feed", name, "err", err)
		}
		m.log.Info("feed removed", "feed", name)
	}
	for _, f := range fresh {
		if err := m.position(ctx, &f.spec, true); err != nil {
			// Not fatal: the feed starts from the reset offset (start
			// of log) rather than not at all; Prepare normally did this.
			m.log.Warn("feed: position consumer group", "feed", f.spec.Name, "err", err)
		}
		f.start(m.base)
		m.log.Info("feed started", "feed", f.spec.Name, "type", f.spec.Type, "sources", f.spec.Sources)
	}
	return errors.Join(errs...)
}

// recordStorers picks, for each NF type, the one xdr feed of specs (those
// that run) that stores the records of the transactions that type saw
// first: of the feeds reading it, the one with the most sources (its
// records join the most hops), then the first by name. Two xdr feeds over
// the same sources, say one to an analytics topic and one filtered to a
// probe, would otherwise store every transaction twice. Every node picks
// the same from the same specs.
func (m *Manager) recordStorers(specs []runPlan) map[string]string {
	best := map[string]*runPlan{}
	for i := range specs {
		s := &specs[i]
		if s.Type != TypeXDR || !s.running() {
			continue
		}
		if c := s.FeedSpec; m.validate(&c, s.stage == stageCorrelate) != nil {
			continue
		}
		srcs := s.sources()
		for _, nf := range srcs {
			b := best[nf]
			if b == nil || len(srcs) > len(b.sources()) || len(srcs) == len(b.sources()) && s.Name < b.Name {
				best[nf] = s
			}
		}
	}
	out := make(map[string]string, len(best))
	for nf, s := range best {
		out[nf] = s.Name
	}
	return out
}

// stores reports whether the xdr feed named feed stores r (recordStorers).
func (m *Manager) stores(feed string, r *xdr.Record) bool {
	st := m.storers.Load()
	if st == nil || len(r.Hops) == 0 {
		return false
	}
	return (*st)[r.Hops[0].NFType] == feed
}

// ledger is the named feed's ledger, shared by its incarnations (each
// resets it as it starts: feed.start).
func (m *Manager) ledger(name string) *ledger {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	l := m.ledgers[name]
	if l == nil {
		l = newLedger()
		m.ledgers[name] = l
	}
	return l
}

// Prepare positions a new feed's consumer group before the feed is stored,
// so that it delivers every copy produced after Prepare returns (start
// latest) or everything still retained (start earliest).
func (m *Manager) Prepare(ctx context.Context, spec *FeedSpec) error {
	if err := m.Validate(spec); err != nil {
		return err
	}
	if err := checkFileDir(spec); err != nil {
		return err
	}
	// A feed into the director's own Kafka has its topic before it is
	// stored, so that a consumer started right after can subscribe. Where
	// the director makes no topics, one made later will do: the feed says
	// in its status that it waits for it.
	if (spec.Type == TypeKafka || spec.Type == TypeXDR) && spec.Topic != "" && spec.Kafka == nil && m.cfg.CreateTopics {
		out := broker.TopicSpec{Name: spec.Topic, Partitions: outputPartitions}
		if err := broker.EnsureTopics(ctx, m.admin, []broker.TopicSpec{out}, true); err != nil {
			return &FieldError{Field: "topic", Msg: fmt.Sprintf("%q: %v", spec.Topic, err)}
		}
	}
	if spec.Type == TypeXDR && spec.XDR != nil && spec.XDR.Rekey {
		// The first stage reads the NF topics; the second starts on a
		// fresh internal topic from its beginning.
		stage1 := rekeyStage1(&runPlan{FeedSpec: *spec})
		return m.position(ctx, &stage1, false)
	}
	return m.position(ctx, &runPlan{FeedSpec: *spec}, false)
}

// RekeyTopic is the internal topic a re-keyed xdr feed routes copies through.
func RekeyTopic(feed string) string { return "signalbox.rekey." + feed }

// Defaults of the re-key topic (XDRSpec.Rekey*).
const (
	rekeyPartitions   = 12 // spreads a re-keyed feed's correlation over nodes
	rekeyRetention    = time.Hour
	rekeySegmentBytes = 64 << 20
)

// rekeyTopicSpec is the re-key topic of spec's xdr feed, as it is created.
func rekeyTopicSpec(spec *FeedSpec) (broker.TopicSpec, error) {
	ts := broker.TopicSpec{Name: RekeyTopic(spec.Name), Partitions: rekeyPartitions}
	ret, seg := rekeyRetention, int64(rekeySegmentBytes)
	if x := spec.XDR; x != nil {
		if x.RekeyPartitions != 0 {
			if x.RekeyPartitions < 1 || x.RekeyPartitions > 1000 {
				return ts, &FieldError{Field: "xdr.rekey_partitions", Msg: fmt.Sprintf("%d: want 1 to 1000", x.RekeyPartitions)}
			}
			ts.Partitions = x.RekeyPartitions
		}
		if x.RekeyRetention != "" {
			d, err := time.ParseDuration(x.RekeyRetention)
			if err != nil || d < time.Minute {
				return ts, &FieldError{Field: "xdr.rekey_retention", Msg: fmt.Sprintf("%q: want a Go duration of at least 1m", x.RekeyRetention)}
			}
			ret = d
		}
		if x.RekeySegmentBytes != 0 {
			if x.RekeySegmentBytes < 1<<20 || x.RekeySegmentBytes > 1<<30 {
				return ts, &FieldError{Field: "xdr.rekey_segment_bytes", Msg: fmt.Sprintf("%d: want 1 MiB to 1 GiB", x.RekeySegmentBytes)}
			}
			seg = x.RekeySegmentBytes
		}
	}
	ts.Configs = map[string]string{
		"retention.ms":   strconv.FormatInt(ret.Milliseconds(), 10),
		"segment.bytes":  strconv.FormatInt(seg, 10),
		"cleanup.policy": "delete",
	}
	return ts, nil
}

// rekeyStage1 is the first stage of a re-keyed xdr feed: a kafka feed of the
// NF topics into the re-key topic, keyed by correlation id (the kafka sink's
// key), so each transaction lands in one partition.
func rekeyStage1(s *runPlan) runPlan {
	return runPlan{FeedSpec: FeedSpec{Name: rekeyStage1Name(s.Name), Type: TypeKafka, Sources: s.Sources, Directions: s.Directions,
		Enabled: s.Enabled, Start: s.Start, KafkaSpec: KafkaSpec{Topic: RekeyTopic(s.Name)}, Created: s.Created},
		stage: stageRekey, standby: s.standby, fromCreation: s.fromCreation}
}

// Groups are the consumer groups of the feed spec: its own, and its re-key
// stage's for a re-keyed xdr feed.
func (m *Manager) Groups(spec *FeedSpec) []string {
	g := []string{m.cfg.GroupPrefix + spec.Name}
	if spec.Type == TypeXDR && spec.XDR != nil && spec.XDR.Rekey {
		g = append(g, m.cfg.GroupPrefix+rekeyStage1Name(spec.Name))
	}
	return g
}

// rekeyStage1Name is the name of the first stage of the re-keyed xdr feed
// named feed.
func rekeyStage1Name(feed string) string { return feed + ".rekey" }

// expand makes the plans into what runs: a feed that stands by is
// disabled here, and each re-keyed xdr feed is replaced by its two stages,
// the kafka feed into the re-key topic and the correlating feed (keeping
// the user's name, so status and records read as before) reading that
// topic.
func (m *Manager) expand(ctx context.Context, plans []Plan) []runPlan {
	out := make([]runPlan, 0, len(plans))
	for _, p := range plans {
		s := runPlan{FeedSpec: p.Spec, standby: p.Standby, fromCreation: p.FromCreation}
		if p.Standby {
			off := false
			s.Enabled = &off
		}
		if s.Type != TypeXDR || s.XDR == nil || !s.XDR.Rekey {
			out = append(out, s)
			continue
		}
		topic := RekeyTopic(s.Name)
		stage2 := s
		stage2.Sources = []string{topic}
		stage2.Directions = nil // the first stage filtered them
		stage2.Start = "earliest"
		stage2.stage = stageCorrelate
		stage2.upstream = s.Sources
		// Apply runs at every config change: the topic is ensured only
		// when this stage is about to (re)start, not for a running one.
		f, running := m.feedSet()[s.Name]
		running = running && f.key == stage2.key()
		if !running {
			ts, err := rekeyTopicSpec(&s.FeedSpec)
			if err == nil {
				err = broker.EnsureTopics(ctx, m.admin, []broker.TopicSpec{ts}, m.cfg.CreateTopics)
			}
			if err != nil {
				m.log.Warn("xdr feed: re-key topic", "feed", s.Name, "topic", topic, "err", err)
			}
		}
		out = append(out, rekeyStage1(&s), stage2)
	}
	return out
}

// position commits the start or end offsets of every source partition for
// the feed's group; with onlyMissing, only where the group has no commit.
func (m *Manager) position(ctx context.Context, spec *runPlan, onlyMissing bool) error {
	group := m.cfg.GroupPrefix + spec.Name
	var (
		lo  kadm.ListedOffsets
		err error
	)
	switch {
	case spec.Start == "earliest":
		lo, err = m.adm.ListStartOffsets(ctx, spec.Sources...)
	case onlyMissing && spec.fromCreation && spec.Created != nil:
		// The first copy since the feed was created, or the end.
		lo, err = m.adm.ListOffsetsAfterMilli(ctx, spec.Created.UnixMilli(), spec.Sources...)
	default:
		lo, err = m.adm.ListEndOffsets(ctx, spec.Sources...)
	}
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return fmt.Errorf("feed %q: list offsets: %w", spec.Name, err)
	}
	offs := lo.Offsets()
	if onlyMissing {
		have, err := m.committed(ctx, group, partsOf(lo))
		if err != nil {
			return fmt.Errorf("feed %q: fetch committed offsets: %w", spec.Name, err)
		}
		have.Each(func(r kadm.OffsetResponse) {
			if r.Err == nil && r.At >= 0 {
				offs.Delete(r.Topic, r.Partition)
			}
		})
		if len(offs) == 0 {
			return nil
		}
		if spec.fromCreation && spec.Created != nil && spec.Start != "earliest" {
			n := 0
			offs.Each(func(kadm.Offset) { n++ })
			m.log.Warn("feed taken over: partitions where its site had no position start from the feed's creation",
				"feed", spec.Name, "partitions", n, "created", spec.Created.Format(time.RFC3339))
		}
	}
	if err := m.adm.CommitAllOffsets(ctx, group, offs); err != nil {
		return fmt.Errorf("feed %q: commit start position: %w", spec.Name, err)
	}
	return nil
}

// Status reports one feed.
func (m *Manager) Status(name string) (FeedStatus, bool) {
	f, ok := m.feedSet()[name]
	if !ok {
		return FeedStatus{}, false
	}
	return f.status(), true
}

// Statuses reports every feed, by name.
func (m *Manager) Statuses() []FeedStatus {
	feeds := m.feedSet()
	out := make([]FeedStatus, 0, len(feeds))
	for _, f := range feeds {
		out = append(out, f.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
