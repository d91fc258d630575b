// Package broker runs the embedded single-node Kafka broker (franz-go's kfake
// with disk persistence and retention) and administers the director's topics
// on it or on an external Kafka cluster.
package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DLQTopic is the dead-letter topic that receives undecodable copies.
const DLQTopic = "signalbox.dlq"

// ThirdPartyTopic is the topic of copies from NFs without a topic of their
// own (AMF, SMF, other vendors' NFs): the reference product's name for it.
const ThirdPartyTopic = "NON_ORACLE"

// DiameterTopic takes Diameter message copies, from whichever NF (a DRA, a
// DEA, a collector): one topic for one protocol, read by Diameter feeds.
const DiameterTopic = "DIAMETER"

// SASL mechanisms.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// Defaults.
const (
	DefaultAddr            = ":9092"
	DefaultRetention       = 5 * time.Minute
	DefaultRetentionBytes  = int64(1) << 30 // per partition
	DefaultMaxMessageBytes = int32(1 << 20)
	// DefaultMaxRequestBytes is Apache Kafka's socket.request.max.bytes.
	DefaultMaxRequestBytes = int32(100 << 20)
)

// TopicSpec is a topic the director needs.
type TopicSpec struct {
	Name       string
	Partitions int
	// Configs are topic settings given at creation (retention.ms,
	// segment.bytes, ...); nil takes the cluster's defaults. An existing
	// topic keeps its own.
	Configs map[string]string
}

// DefaultTopics returns the per-NF-type copy topics plus the dead-letter topic.
// Partition counts follow the reference deployment (SCP carries the most).
func DefaultTopics() []TopicSpec {
	return []TopicSpec{
		{Name: "SCP", Partitions: 12},
		{Name: "NRF", Partitions: 6},
		{Name: "SEPP", Partitions: 6},
		{Name: "PCF", Partitions: 6},
		{Name: "BSF", Partitions: 6},
		{Name: ThirdPartyTopic, Partitions: 6},
		{Name: DiameterTopic, Partitions: 6},
		{Name: DLQTopic, Partitions: 1},
	}
}

// SASLConfig enables SASL on the embedded broker's listener.
type SASLConfig struct {
	Mechanism string            // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	Users     map[string]string // user -> password
}

// Config configures the embedded broker.
type Config struct {
	Addr           string        // listen address; default ":9092"
	AdvertisedAddr string        // what clients are told; default derived from Addr (advertiseFor)
	DataDir        string        // persistence directory; empty keeps everything in memory
	Retention      time.Duration // default 5m
	RetentionBytes int64         // per partition; default 1 GiB
	Topics         []TopicSpec   // default DefaultTopics()
	SASL           *SASLConfig
	TLS            *tls.Config
	// ClientTLS is what in-process clients (ClientConfig) use to reach a
	// TLS listener; nil skips verification, which is only sound when
	// Addrs is loopback.
	ClientTLS        *tls.Config
	MaxMessageBytes  int32 // largest record batch the broker accepts; default 1 MiB
	AutoCreateTopics bool  // let producers create topics by naming them; off so an NF's typo is refused
	// SyncWrites fsyncs every produced batch (slower, survives power loss).
	SyncWrites bool
	// MaxRequestBytes is the largest request the listener reads (Kafka's
	// socket.request.max.bytes): a larger one is refused before anything
	// is allocated, and its connection closed; default 100 MiB.
	MaxRequestBytes int32
	// Registerer takes the listener's refusal counter
	// (signalbox_kafka_refused_total); nil keeps it unregistered.
	Registerer prometheus.Registerer

	// Users are the credentials of clients from other hosts (and of every
	// client when Anonymous is AnonymousNone), with what each may do.
	Users []User
	// Anonymous says which clients need no credential: by default those
	// on this host.
	Anonymous Anonymous

	timeouts *timeouts // the listener guard's; nil: defaultTimeouts (tests shorten them)
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = DefaultRetentionBytes
	}
	if c.Topics == nil {
		c.Topics = DefaultTopics()
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
}

func (c *Config) validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("broker: addr %q: %w", c.Addr, err)
	}
	if c.AdvertisedAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedAddr); err != nil {
			return fmt.Errorf("broker: advertised addr %q: %w", c.AdvertisedAddr, err)
		}
	}
	if c.Retention < 0 {
		return fmt.Errorf("broker: retention %s is negative", c.Retention)
	}
	if c.MaxMessageBytes < 0 {
		return fmt.Errorf("broker: max message bytes %d is negative", c.MaxMessageBytes)
	}
	if c.MaxRequestBytes < c.MaxMessageBytes {
		return fmt.Errorf("broker: max request bytes %d is below max message bytes %d: a record batch the broker accepts would not fit in a request", c.MaxRequestBytes, c.MaxMessageBytes)
	}
	for _, t := range c.Topics {
		if err := ValidateTopicName(t.Name); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		if t.Partitions < 1 {
			return fmt.Errorf("broker: topic %q: partitions must be >= 1", t.Name)
		}
	}
	if c.SASL != nil {
		switch c.SASL.Mechanism {
		case MechPlain, MechScramSHA256, MechScramSHA512:
		default:
			return fmt.Errorf("broker: sasl mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASL.Mechanism)
		}
		if len(c.SASL.Users) == 0 {
			return errors.New("broker: sasl enabled without users")
		}
	}
	return nil
}

// ValidateTopicName applies Kafka's topic naming rules.
func ValidateTopicName(name string) error {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("topic %q: must be 1-249 characters and not . or ..", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic %q: invalid character %q (allowed: a-z A-Z 0-9 . _ -)", name, r)
		}
	}
	return nil
}

// Broker is a running embedded broker.
type Broker struct {
	c      *kfake.Cluster
	addrs  []string
	bound  string // the listener's own address
	guard  *guard
	admins []User // the -kafka-sasl-mechanism users, kept across SetUsers
	client ClientConfig
	log    *slog.Logger
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// advertisedListener reports the advertised address as its own, because kfake
// tells clients whatever the listener's Addr is.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

// Start starts the embedded broker and creates any missing topics. It returns
// once clients can connect.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Broker, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "broker")

	var advertised, bound string
	to := defaultTimeouts
	if cfg.timeouts != nil {
		to = *cfg.timeouts
	}
	g := newGuard(cfg.MaxRequestBytes, to, cfg.Registerer, log)
	var admins []User
	g.anonymous = cfg.Anonymous
	if cfg.SASL != nil {
		// Every client authenticates, as one of these users, each of
		// which may do everything.
		g.anonymous = AnonymousNone
		for u, p := range cfg.SASL.Users {
			admins = append(admins, User{Name: u, Password: p, Role: RoleAdmin})
		}
	}
	cc := ClientConfig{}
	if cfg.SASL != nil {
		for u, p := range cfg.SASL.Users {
			if cc.Username == "" || u < cc.Username { // deterministic admin identity
				cc.Username, cc.Password = u, p
			}
		}
		cc.SASLMechanism = cfg.SASL.Mechanism
	} else if g.anonymous == AnonymousNone {
		// Nobody is anonymous, signalbox's own clients neither: they are
		// a user of this process's own, with a password it makes up.
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return nil, err
		}
		cc.SASLMechanism, cc.Username, cc.Password = MechScramSHA512, internalUser, hex.EncodeToString(raw[:])
		admins = append(admins, User{Name: cc.Username, Password: cc.Password, Role: RoleAdmin})
	}
	var err error
	if g.users, err = newUsers(append(admins, cfg.Users...)); err != nil {
		return nil, err
	}
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("broker: listen %s: %w", cfg.Addr, err)
		}
		bound = ln.Addr().String()
		_, port, _ := net.SplitHostPort(bound)
		advertised = advertiseFor(cfg.Addr, cfg.AdvertisedAddr, port)
		// TLS here rather than kfake's: the guard reads the requests
		// the TLS layer decrypts.
		if cfg.TLS != nil {
			ln = tls.NewListener(ln, cfg.TLS)
		}
		return advertisedListener{Listener: guardListener{Listener: ln, g: g}, addr: strAddr(advertised)}, nil
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.ClusterID("signalbox"),
		kfake.BrokerConfigs(map[string]string{
			"log.retention.ms":    strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
			"log.retention.bytes": strconv.FormatInt(cfg.RetentionBytes, 10),
			"message.max.bytes":   strconv.Itoa(int(cfg.MaxMessageBytes)),
			// Compacted topics (an exactly-once xdr feed's checkpoints,
			// a few records a second) are compacted every 10 minutes
			// rather than kfake's hourly default, so taking a partition
			// up reads little.
			"log.cleaner.backoff.ms": "600000",
		}),
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(6))
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("broker: data dir: %w", err)
		}
		// The configured users are authoritative: kfake would otherwise
		// reload the users of the previous run and ignore a changed password.
		if err := os.Remove(filepath.Join(cfg.DataDir, "sasl.json")); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("broker: reset persisted sasl users: %w", err)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("broker: start: %w", err)
	}
	g.topicByID = func(id [16]byte) string {
		if ti := c.TopicIDInfo(id); ti != nil {
			return ti.Topic
		}
		return ""
	}
	b := &Broker{c: c, log: log, stop: make(chan struct{}), bound: bound, guard: g, admins: admins}
	// In-process clients always dial the real listener address.
	b.addrs = []string{advertised}
	cc.Brokers = b.addrs
	if cfg.TLS != nil {
		cc.TLS = cfg.ClientTLS
		if cc.TLS == nil {
			cc.TLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // documented: our own listener
		}
	}
	b.client = cc

	if err := b.ensure(ctx, cfg); err != nil {
		b.Close()
		return nil, err
	}
	b.wg.Add(1)
	go b.retentionLoop(cfg.Retention)
	if cfg.DataDir != "" && reaperWorks {
		r := newReaper(cfg.DataDir, log)
		b.wg.Add(1)
		go func() { defer b.wg.Done(); r.run(b.stop) }()
	}
	log.Info("kafka broker started", "listen", cfg.Addr, "advertised", advertised, "data_dir", cfg.DataDir,
		"retention", cfg.Retention, "retention_bytes", cfg.RetentionBytes, "topics", len(cfg.Topics))
	return b, nil
}

func (b *Broker) ensure(ctx context.Context, cfg Config) error {
	cl, err := b.client.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, cl, cfg.Topics, true); err != nil {
		return err
	}
	// Explicit topic configs make retention visible to describe-configs
	// and keep it right after a restart with changed settings.
	ret := strconv.FormatInt(cfg.Retention.Milliseconds(), 10)
	rb := strconv.FormatInt(cfg.RetentionBytes, 10)
	names := make([]string, len(cfg.Topics))
	for i, t := range cfg.Topics {
		names[i] = t.Name
	}
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: &ret},
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: &rb},
	}, names...)
	if err != nil {
		return fmt.Errorf("broker: set topic retention: %w", err)
	}
	for _, r := range resp {
		if r.Err != nil {
			return fmt.Errorf("broker: set retention of topic %q: %w", r.Name, r.Err)
		}
	}
	return nil
}

// retentionLoop applies retention often enough that the log never holds much
// more than Retention of data (kfake's own cleaner runs hourly).
func (b *Broker) retentionLoop(ret time.Duration) {
	defer b.wg.Done()
	every := min(max(ret/10, time.Second), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.c.ApplyRetention()
		}
	}
}

// Addrs is the bootstrap list for clients.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// ListenAddr is the address the broker's listener is bound to (its port
// the kernel's choice when Addr asked for port 0); Addrs is what clients
// are told.
func (b *Broker) ListenAddr() string { return b.bound }

// internalUser is signalbox's own clients' user when every client
// authenticates and no -kafka-sasl-mechanism user is configured.
const internalUser = "signalbox-internal"

// SetUsers replaces the credentials of clients from other hosts;
// connections already authenticated keep the user they were.
func (b *Broker) SetUsers(list []User) error {
	return b.guard.users.set(append(slices.Clone(b.admins), list...))
}

// ClientConfig is a client configuration that reaches this broker with the
// first (by name) configured SASL user.
func (b *Broker) ClientConfig() ClientConfig { return b.client }

// ApplyRetention deletes expired data now (tests; the broker also does it periodically).
func (b *Broker) ApplyRetention() { b.c.ApplyRetention() }

// Close stops the broker, persisting its state to DataDir.
func (b *Broker) Close() {
	b.once.Do(func() {
		close(b.stop)
		b.wg.Wait()
		b.c.Close()
		b.log.Info("kafka broker stopped")
	})
}

// PartitionCounts is the partition count of each of the named topics that
// exists. It asks the cluster directly: kadm's ListTopics may answer from a
// cache that predates a topic created a moment ago.
func PartitionCounts(ctx context.Context, cl *kgo.Client, names []string) (map[string]int, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	out := make(map[string]int, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			out[*t.Topic] = len(t.Partitions)
		}
	}
	return out, nil
}

// EnsureTopics checks that every topic exists, creating missing ones when
// create is true; otherwise it fails naming the missing topics. Existing
// topics are left as they are (partition counts are never changed).
func EnsureTopics(ctx context.Context, cl *kgo.Client, topics []TopicSpec, create bool) error {
	adm := kadm.NewClient(cl)
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	counts, err := PartitionCounts(ctx, cl, names)
	if err != nil {
		return err
	}
	var missing []TopicSpec
	for _, t := range topics {
		if _, ok := counts[t.Name]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !create {
		ms := make([]string, len(missing))
		for i, t := range missing {
			ms[i] = t.Name
		}
		return fmt.Errorf("kafka topics missing (create them or allow creation): %v", ms)
	}
	for _, t := range missing {
		var configs map[string]*string
		if len(t.Configs) > 0 {
			configs = make(map[string]*string, len(t.Configs))
			for k, v := range t.Configs {
				configs[k] = kadm.StringPtr(v)
			}
		}
		r, err := adm.CreateTopic(ctx, int32(t.Partitions), -1, configs, t.Name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			_ = r
			return fmt.Errorf("create topic %q: %w", t.Name, err)
		}
	}
	return nil
}
