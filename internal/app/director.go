package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/callcontrol/callstream"
	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/datadirector/ingest"
	"github.com/signalbox/signalbox/internal/datadirector/site"
	"github.com/signalbox/signalbox/internal/datadirector/trace"
	"github.com/signalbox/signalbox/internal/datadirector/xdrstore"
	"github.com/signalbox/signalbox/internal/platform/api"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// directorParts is the running data director: the embedded broker (unless an
// external cluster is used), the feed manager and the HTTP/2 ingest.
//
// Its parts are the server's (supervisor), started in order: the broker,
// the records store, the feed manager, the two-site parts, the call stream,
// the topic counters, the ingest; each stops before those it came after.
type directorParts struct {
	s          *Server
	broker     *broker.Broker
	kafkaUsers *kafkaUsers // the embedded broker's users (nil with an external Kafka)
	client     broker.ClientConfig
	mgr        *director.Manager
	ingestCl   *kgo.Client

	offsetsCl *kgo.Client
	ingestLn  net.Listener
	ingest    *http.Server

	// The topics (planTopics): the NF topics, those and the peer site's
	// mirrored ones (what feeds and traces read), and every topic made at
	// start (with the dead-letter and call records' topics).
	nfTopics, topics, made []broker.TopicSpec

	// Subscriber traces: their files' directory and the running ones last
	// applied (ids, comma-joined).
	traceDir      string
	runningTraces string

	// records keeps the xdr feeds' transaction records for search.
	records *xdrstore.Store

	// Two-site redundancy (-site): the mirror of this site's copies into
	// the peer's Kafka and the pair that places the feeds.
	mirror *site.Mirror
	pair   *site.Pair

	// stream produces the CURRI call records (nil with -calls-topic "").
	stream *callstream.Stream
}

// startDirector starts the director's parts in order, each registered with
// the server's supervisor as it starts (a failed start stops those before
// it).
func startDirector(ctx context.Context, s *Server) (*directorParts, error) {
	d := &directorParts{s: s, traceDir: filepath.Join(s.cfg.DataDir, "traces")}
	d.planTopics()
	for _, start := range []func(context.Context) error{
		d.startKafka, d.startRecords, d.startFeeds, d.startCallStream, d.startTopicCounters, d.startIngest,
	} {
		if err := start(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// planTopics works out the topics: the NF topics (-kafka-topics); with a
// peer site, those its copies are mirrored into, which feeds read too; and
// the dead-letter topic (undecodable copies, copies a sink can never
// deliver) and the call records' topic, made with them.
func (d *directorParts) planTopics() {
	cfg := d.s.cfg
	topics, _ := config.ParseTopics(cfg.KafkaTopics)
	for _, t := range topics {
		d.nfTopics = append(d.nfTopics, broker.TopicSpec{Name: t.Name, Partitions: t.Partitions})
	}
	d.topics = append(slices.Clone(d.nfTopics), d.s.mirroredTopics(d.nfTopics)...)
	d.made = append(slices.Clone(d.topics), broker.TopicSpec{Name: broker.DLQTopic, Partitions: 1})
	if cfg.CallsTopic != "" {
		d.made = append(d.made, broker.TopicSpec{Name: cfg.CallsTopic, Partitions: 6})
	}
}

// startKafka starts the embedded broker, or checks the external cluster's
// topics (creating them with -kafka-create-topics), and sets the client
// configuration signalbox's own clients use.
func (d *directorParts) startKafka(ctx context.Context) error {
	s, cfg := d.s, d.s.cfg
	defer func() { d.client.Logger = s.log.With("component", "kafka") }()
	clientTLS, serverTLS, err := kafkaTLS(cfg)
	if err != nil {
		return err
	}
	if cfg.KafkaBrokers != "" {
		d.client = broker.ClientConfig{Brokers: config.SplitList(cfg.KafkaBrokers), SASLMechanism: cfg.KafkaSASLMechanism,
			Username: cfg.KafkaUsername, Password: cfg.KafkaPassword, TLS: clientTLS}
		cl, err := kgo.NewClient(d.client.Opts()...)
		if err != nil {
			return err
		}
		defer cl.Close()
		return broker.EnsureTopics(ctx, cl, d.made, cfg.KafkaCreateTopics)
	}
	bc := broker.Config{
		Addr:            cfg.KafkaAddr,
		AdvertisedAddr:  cfg.KafkaAdvertisedAddr,
		DataDir:         filepath.Join(cfg.DataDir, "kafka"),
		Retention:       cfg.KafkaRetention,
		RetentionBytes:  cfg.KafkaRetentionBytes,
		Topics:          d.made,
		TLS:             serverTLS,
		MaxMessageBytes: int32(cfg.KafkaMaxMessageBytes),
		MaxRequestBytes: int32(cfg.KafkaMaxRequestBytes),
		Registerer:      s.reg,
	}
	if cfg.KafkaSASLMechanism != "" {
		bc.SASL = &broker.SASLConfig{Mechanism: cfg.KafkaSASLMechanism, Users: map[string]string{cfg.KafkaUsername: cfg.KafkaPassword}}
	}
	var base []broker.User
	if base, bc.Anonymous, err = s.brokerAccess(d.topics); err != nil {
		return err
	}
	if d.kafkaUsers, err = newKafkaUsers(cfg.DataDir, base); err != nil {
		return err
	}
	bc.Users = d.kafkaUsers.users()
	b, err := broker.Start(ctx, bc, s.log)
	if err != nil {
		return err
	}
	d.broker = b
	d.kafkaUsers.b = b
	s.parts.closer("kafka broker", b.Close)
	// signalbox's own clients are the broker's (its -kafka-username, or a
	// user of its own when local clients authenticate too, or none; they
	// trust its certificate). Producers to it (kafka feeds, dead letters)
	// may send what it accepts, and no more.
	d.client = b.ClientConfig()
	d.client.MaxMessageBytes = int32(cfg.KafkaMaxMessageBytes)
	s.log.Info("embedded Kafka broker listening", "addrs", strings.Join(b.Addrs(), ","))
	return nil
}

// startRecords opens the store of the xdr feeds' transaction records.
func (d *directorParts) startRecords(context.Context) (err error) {
	s, cfg := d.s, d.s.cfg
	if d.records, err = xdrstore.Open(xdrstore.Config{Dir: filepath.Join(cfg.DataDir, "xdrs"), MaxAge: cfg.XDRStoreMaxAge,
		MaxBytes: cfg.XDRStoreMaxBytes, Codec: cfg.XDRStoreCodec, Registerer: s.reg, Logger: s.log}); err != nil {
		return err
	}
	s.parts.loop("xdr records store", d.records.Run) // its stop writes what the feeds made last
	return nil
}

// startFeeds starts the feed manager and, with -site, the two-site parts,
// and applies the stored feeds once.
func (d *directorParts) startFeeds(ctx context.Context) error {
	s, cfg := d.s, d.s.cfg
	mgr, err := director.NewManager(director.Config{
		RecordStore:    d.records,
		Client:         d.client,
		Topics:         d.topics,
		CallsTopic:     cfg.CallsTopic,
		MaskNumbers:    cfg.MaskNumbers,
		Node:           s.node,
		CreateTopics:   cfg.KafkaBrokers == "" || cfg.KafkaCreateTopics,
		Sharing:        director.Sharing{SoloReads: cfg.FeedSoloReads},
		SessionTimeout: cfg.KafkaSessionTimeout,
		Registerer:     s.reg,
		Logger:         s.log,
	})
	if err != nil {
		return err
	}
	d.mgr = mgr
	s.parts.run("feeds", mgr.Run)
	if cfg.Site != "" {
		if err := d.startSite(d.nfTopics); err != nil {
			return err
		}
	}
	d.reconcile(ctx)
	return nil
}

// startCallStream produces the CURRI call records into -calls-topic.
func (d *directorParts) startCallStream(context.Context) (err error) {
	s, cfg := d.s, d.s.cfg
	if cfg.CallsTopic == "" {
		return nil
	}
	if d.stream, err = callstream.New(callstream.Config{Client: d.client, Topic: cfg.CallsTopic,
		Registerer: s.reg, Logger: s.log}); err != nil {
		return err
	}
	// Its stop flushes the call records queued so far, while the broker is
	// up.
	s.parts.loop("call stream", func(ctx context.Context) { d.stream.Run(ctx, 5*time.Second) })
	s.log.Info("call decisions are streamed to Kafka", "topic", cfg.CallsTopic)
	return nil
}

// startTopicCounters counts the copies written to each NF topic, by any
// producer (Kafka clients and the HTTP/2 ingest alike), from the topics'
// end offsets.
func (d *directorParts) startTopicCounters(context.Context) (err error) {
	s := d.s
	if d.offsetsCl, err = d.client.NewClient(); err != nil {
		return err
	}
	s.parts.closer("topic counter client", d.offsetsCl.Close)
	topicCopies := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_kafka_topic_copies_total",
		Help: "Copies written to each NF topic (from the topics' end offsets, polled every few seconds).",
	}, []string{"topic"})
	s.reg.MustRegister(topicCopies)
	s.parts.loop("topic counters", func(ctx context.Context) { d.pollTopicOffsets(ctx, d.topics, topicCopies) })
	return nil
}

// startIngest serves the HTTP/2 ingest (-ingest-addr): message copies
// POSTed by NFs, produced into their topics.
func (d *directorParts) startIngest(context.Context) (err error) {
	s, cfg := d.s, d.s.cfg
	if cfg.IngestAddr == "" {
		return nil
	}
	icl := d.client
	icl.MaxMessageBytes = int32(cfg.KafkaMaxMessageBytes) // the broker, not the client, decides what is too large
	if d.ingestCl, err = icl.NewClient(kgo.ProducerLinger(time.Millisecond)); err != nil {
		return err
	}
	s.parts.closer("ingest producer", d.ingestCl.Close)
	h := ingest.NewHandler(d.ingestCl, ingest.Config{Topics: d.nfTopics, MaxRecordBytes: cfg.KafkaMaxMessageBytes, Registerer: s.reg, Logger: s.log})
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	// Limits (docs/operations.md): headers in 10 s and 64 KiB; a request
	// (its body, up to 64 MiB, and Kafka's acknowledgement) within a
	// minute; idle connections closed after 5 minutes; HTTP/2 frames of 1
	// MiB at most (Go's default), its bodies in flight bounded by the
	// handler.
	d.ingest = &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, IdleTimeout: 5 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	useTLS := cfg.IngestTLSCert != ""
	if useTLS {
		cert, err := tls.LoadX509KeyPair(cfg.IngestTLSCert, cfg.IngestTLSKey)
		if err != nil {
			return fmt.Errorf("ingest tls: %w", err)
		}
		d.ingest.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if d.ingestLn, err = net.Listen("tcp", cfg.IngestAddr); err != nil {
		return fmt.Errorf("ingest listener: %w", err)
	}
	s.parts.add("ingest listener", func(ctx context.Context) error { return shutdownListener(ctx, d.ingest, d.ingestLn) })
	go s.serve("ingest", d.ingest, d.ingestLn, useTLS)
	s.log.Info("HTTP/2 ingest listening", "addr", d.ingestLn.Addr().String(), "tls", useTLS)
	return nil
}

// reconcile applies the stored feeds to the running manager.
func (d *directorParts) reconcile(ctx context.Context) {
	recs, err := d.s.store.ListFeeds(ctx)
	if err != nil {
		d.s.log.Error("loading feeds", "err", err)
		return
	}
	specs := make([]director.FeedSpec, 0, len(recs))
	for _, r := range recs {
		var sp director.FeedSpec
		if err := json.Unmarshal(r.Spec, &sp); err != nil {
			d.s.log.Error("stored feed is unreadable; skipped", "feed", r.Name, "err", err)
			continue
		}
		specs = append(specs, sp)
	}
	if d.kafkaUsers != nil {
		if err := d.kafkaUsers.retain(specs); err != nil {
			d.s.log.Error("kafka consumer credentials of deleted feeds", "err", err)
		}
	}
	specs = append(specs, d.traceFeeds(ctx)...)
	plans := director.Plans(specs)
	if d.pair != nil {
		plans = d.pair.Place(specs)
	}
	if err := d.mgr.ApplyPlans(ctx, plans); err != nil {
		d.s.log.Error("some stored feeds could not be applied", "err", err)
	}
}

// reconcileLoop applies the stored feeds again after API changes (kick),
// after the store's change notifications (other nodes) and whenever the
// periodic check finds a config version it has not applied.
func (d *directorParts) reconcileLoop(ctx context.Context, st store.Store, kick <-chan struct{}) {
	// -1: the first check reconciles again, covering any change committed
	// between the director's start and this loop (Apply is idempotent for
	// unchanged feeds).
	applied := int64(-1)
	changes := st.Changes(ctx)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	check := func() {
		if v, err := st.ConfigVersion(ctx); err == nil && v != applied {
			d.reconcile(ctx)
			applied = v
		}
	}
	check()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			v, _ := st.ConfigVersion(ctx)
			d.reconcile(ctx)
			applied = v
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			check()
		case <-tick.C:
			check()
			// Traces start and end by the clock too: apply again when
			// the set of running ones changed, and drop the ended ones
			// past their retention.
			if d.tracesChanged(ctx) {
				d.reconcile(ctx)
			}
		}
	}
}

// traceFeeds are the file feeds of the running subscriber traces of this
// node, over every NF topic.
func (d *directorParts) traceFeeds(ctx context.Context) []director.FeedSpec {
	ts := d.traces(ctx)
	var sources []string
	for _, t := range d.topics {
		sources = append(sources, t.Name)
	}
	var out []director.FeedSpec
	now := time.Now()
	var running []string
	for _, t := range ts {
		if !t.Running(now) || !t.On(d.s.node) {
			continue
		}
		// The feeds start where their groups committed; a new trace's
		// groups have no commit, and the director positions them where
		// the trace says (its look-back, else now) as it starts them. So
		// a node restarted mid-trace goes on where it was, neither
		// skipping what came meanwhile nor catching it all again.
		out = append(out, t.Feeds(d.traceDir, sources)...)
		running = append(running, t.ID)
	}
	d.runningTraces = strings.Join(running, ",")
	return out
}

// tracesChanged reports whether the running traces differ from those last
// applied, and deletes the traces (and files) past their retention.
func (d *directorParts) tracesChanged(ctx context.Context) bool {
	ts := d.traces(ctx)
	now := time.Now()
	var running []string
	for _, t := range ts {
		switch {
		case !t.On(d.s.node):
			// Another node's: its files, and so its removal, are there.
		case t.Running(now):
			running = append(running, t.ID)
		case now.After(t.End.Add(d.s.cfg.TraceRetention)):
			if err := os.RemoveAll(trace.Dir(d.traceDir, t.ID)); err == nil {
				_ = d.s.store.DeleteTrace(ctx, t.ID)
				d.s.log.Info("trace removed after its retention", "trace", t.ID)
			}
		}
	}
	return strings.Join(running, ",") != d.runningTraces
}

func (d *directorParts) traces(ctx context.Context) []trace.Trace {
	recs, err := d.s.store.ListTraces(ctx)
	if err != nil {
		d.s.log.Warn("traces: read the store", "err", err)
		return nil
	}
	out := make([]trace.Trace, 0, len(recs))
	for _, r := range recs {
		var t trace.Trace
		if err := json.Unmarshal(r.Spec, &t); err != nil {
			d.s.log.Error("stored trace is unreadable; skipped", "trace", r.Name, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out
}

// pollTopicOffsets adds each NF topic's growth to signalbox_kafka_topic_copies_total.
func (d *directorParts) pollTopicOffsets(ctx context.Context, specs []broker.TopicSpec, c *prometheus.CounterVec) {
	adm := kadm.NewClient(d.offsetsCl)
	names := make([]string, len(specs))
	for i, t := range specs {
		names[i] = t.Name
	}
	last := map[string]int64{}
	first := true
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offs, err := adm.ListEndOffsets(lctx, names...)
		cancel()
		if err == nil {
			sums := map[string]int64{}
			offs.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					sums[o.Topic] += o.Offset
				}
			})
			for topic, sum := range sums {
				// The first poll sets the baseline: copies from before
				// this process started are not counted as new.
				if prev, ok := last[topic]; ok && sum > prev {
					c.WithLabelValues(topic).Add(float64(sum - prev))
				} else if first {
					c.WithLabelValues(topic).Add(0)
				}
				last[topic] = sum
			}
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// kafkaCredentials issues kafka feeds' consumer credentials: nil unless
// the director's Kafka is the embedded broker.
func (s *Server) kafkaCredentials() api.KafkaCredentials {
	if s.dir == nil || s.dir.kafkaUsers == nil {
		return nil
	}
	return s.dir.kafkaUsers
}

// KafkaAddrs is the bootstrap list of the director's Kafka (nil when off).
func (s *Server) KafkaAddrs() []string {
	if s.dir == nil {
		return nil
	}
	return s.dir.client.Brokers
}

// IngestAddr is the bound address of the HTTP/2 ingest ("" when off).
func (s *Server) IngestAddr() string {
	if s.dir == nil || s.dir.ingestLn == nil {
		return ""
	}
	return s.dir.ingestLn.Addr().String()
}

// feedRuntime is what the API needs of the director; with the director off,
// feed writes are refused.
func (s *Server) feedRuntime() feedRuntime { return feedRuntime{s} }

type feedRuntime struct{ s *Server }

var errNoDirector = errors.New("the data director is not running (serve -director=false)")

func (f feedRuntime) Validate(spec *director.FeedSpec) error {
	if f.s.dir == nil {
		return errNoDirector
	}
	return f.s.dir.mgr.Validate(spec)
}

func (f feedRuntime) Prepare(ctx context.Context, spec *director.FeedSpec) error {
	if f.s.dir == nil {
		return errNoDirector
	}
	return f.s.dir.mgr.Prepare(ctx, spec)
}

func (f feedRuntime) Status(name string) (any, bool) {
	if f.s.dir == nil {
		return nil, false
	}
	return f.s.dir.mgr.Status(name)
}

func kafkaTLS(cfg config.Serve) (client, server *tls.Config, err error) {
	if !cfg.KafkaTLS {
		return nil, nil, nil
	}
	if cfg.KafkaBrokers == "" {
		cert, err := tls.LoadX509KeyPair(cfg.KafkaTLSCert, cfg.KafkaTLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka tls: %w", err)
		}
		return nil, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.KafkaTLSInsecure} //nolint:gosec // opt-in flag
	if cfg.KafkaTLSCA != "" {
		pool, err := config.CAPool(cfg.KafkaTLSCA)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka tls ca: %w", err)
		}
		c.RootCAs = pool
	}
	if cfg.KafkaTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.KafkaTLSCert, cfg.KafkaTLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka tls client cert: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil, nil
}

// exporter serves one-shot exports from the director's Kafka retention (nil
// when the director is off: the API answers 503).
func (s *Server) exporter() api.Exporter {
	if s.dir == nil {
		return nil
	}
	return s.dir.mgr
}

// capturer streams live captures, nil without the director.
func (s *Server) capturer() api.Capturer {
	if s.dir == nil {
		return nil
	}
	return s.dir.mgr
}

// RecentRecords serves an xdr feed's latest records to the API and console.
func (f feedRuntime) RecentRecords(name string, n int) ([]json.RawMessage, bool) {
	if f.s.dir == nil {
		return nil, false
	}
	return f.s.dir.mgr.RecentRecords(name, n)
}
