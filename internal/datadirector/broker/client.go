package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientConfig is how director, ingest and the kafka sink reach Kafka
// (embedded or external).
type ClientConfig struct {
	Brokers       []string
	SASLMechanism string // "", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	Username      string
	Password      string
	TLS           *tls.Config
	// MaxMessageBytes raises the producer's batch limit to what the
	// brokers accept (0 = kgo's default of about 1 MB).
	MaxMessageBytes int32
	// MaxVersion caps the protocol versions asked for at those of a Kafka
	// release ("3.0"), for a cluster that mishandles newer requests (empty:
	// franz-go's newest, each negotiated down by ApiVersions).
	MaxVersion string
	// Logger, when set, receives the client's own log (kgoLogger): group
	// joins, assignments and revocations at debug level, connection
	// trouble at info, its errors as errors.
	Logger *slog.Logger `json:"-"`
}

// Validate reports a configuration that cannot work.
func (c ClientConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka: no brokers")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("kafka: broker %q: want host:port", b)
		}
	}
	if c.MaxVersion != "" && kversion.FromString(c.MaxVersion) == nil {
		return fmt.Errorf("kafka: max version %q: want a Kafka release such as 3.0", c.MaxVersion)
	}
	switch c.SASLMechanism {
	case "":
	case MechPlain, MechScramSHA256, MechScramSHA512:
		if c.Username == "" {
			return fmt.Errorf("kafka: sasl %s needs a username", c.SASLMechanism)
		}
	default:
		return fmt.Errorf("kafka: sasl mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
	return nil
}

// Opts are the kgo options for this configuration. An invalid SASL mechanism
// becomes a mechanism whose authentication fails with a clear error; call
// Validate first to refuse it up front.
func (c ClientConfig) Opts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		// An unknown topic is a misconfiguration; fail fast instead of
		// retrying metadata for a minute.
		kgo.UnknownTopicRetries(3),
	}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgoLogger{c.Logger}))
	}
	if v := kversion.FromString(c.MaxVersion); v != nil {
		opts = append(opts, kgo.MaxVersions(v))
	}
	if c.MaxMessageBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(c.MaxMessageBytes))
		if c.MaxMessageBytes > 50<<20 {
			opts = append(opts, kgo.BrokerMaxWriteBytes(c.MaxMessageBytes*2))
		}
	}
	switch c.SASLMechanism {
	case "":
	case MechPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism()))
	case MechScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism()))
	case MechScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism()))
	default:
		opts = append(opts, kgo.SASL(badMechanism(c.SASLMechanism)))
	}
	return opts
}

// kgoLogger hands franz-go's log to slog, a level lower: its info lines
// (the group's life) are debug lines here, and its warnings (a connection
// closed, a broker unreachable: retried, and reported by the feeds and
// alarms that depend on them) info lines.
type kgoLogger struct{ l *slog.Logger }

func slogLevel(l kgo.LogLevel) slog.Level {
	switch l {
	case kgo.LogLevelError:
		return slog.LevelError
	case kgo.LogLevelWarn:
		return slog.LevelInfo
	case kgo.LogLevelInfo:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - 4
	}
}

func (k kgoLogger) Level() kgo.LogLevel {
	for _, l := range []kgo.LogLevel{kgo.LogLevelDebug, kgo.LogLevelInfo, kgo.LogLevelWarn, kgo.LogLevelError} {
		if k.l.Enabled(context.Background(), slogLevel(l)) {
			return l
		}
	}
	return kgo.LogLevelNone
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	k.l.Log(context.Background(), slogLevel(level), "kafka client: "+msg, keyvals...)
}

// NewClient validates the configuration and builds a client.
func (c ClientConfig) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(c.Opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

type badMechanism string

func (m badMechanism) Name() string { return string(m) }
func (m badMechanism) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return nil, nil, fmt.Errorf("unsupported SASL mechanism %q", string(m))
}

// IsTooLarge reports whether a produce error means the record exceeds the
// broker's (or the client's) size limit.
func IsTooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// IsUnknownTopic reports whether a produce error means the topic does not
// exist (the embedded broker refuses to create topics on demand).
func IsUnknownTopic(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition)
}
