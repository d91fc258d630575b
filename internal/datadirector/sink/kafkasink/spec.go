package kafkasink

import (
	"log/slog"
	"strconv"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

// Spec is a kafka feed's part of the feed's JSON (the director's FeedSpec
// embeds it; an xdr feed producing its records uses it too).
type Spec struct {
	Topic string  `json:"topic,omitempty"`
	Kafka *Target `json:"kafka,omitempty"` // nil = the director's own Kafka
}

// Target is an external Kafka cluster a feed produces to.
type Target struct {
	Brokers       []string      `json:"brokers"`
	SASLMechanism string        `json:"sasl_mechanism,omitempty"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	Username      string        `json:"username,omitempty"`
	Password      string        `json:"password,omitempty"`
	TLS           *sinkspec.TLS `json:"tls,omitempty"`
}

// Validate returns a *sinkspec.FieldError naming the first field at fault.
// own reports whether a topic of the director's own Kafka is one the
// director reads (or dead-letters to): a feed into it would loop.
func (s *Spec) Validate(own func(topic string) bool) error {
	if s.Topic == "" {
		return &sinkspec.FieldError{Field: "topic", Msg: "required: the topic the feed produces to"}
	}
	if err := broker.ValidateTopicName(s.Topic); err != nil {
		return &sinkspec.FieldError{Field: "topic", Msg: err.Error()}
	}
	k := s.Kafka
	if k == nil {
		if own(s.Topic) {
			return sinkspec.Errorf("topic", "%q is a director topic; feeding it would loop", s.Topic)
		}
		return nil
	}
	if len(k.Brokers) == 0 {
		return &sinkspec.FieldError{Field: "kafka.brokers", Msg: "at least one host:port is required"}
	}
	for i, b := range k.Brokers {
		if err := sinkspec.HostPort(b); err != nil {
			return &sinkspec.FieldError{Field: "kafka.brokers[" + strconv.Itoa(i) + "]", Msg: err.Error()}
		}
	}
	switch k.SASLMechanism {
	case "":
	case broker.MechPlain, broker.MechScramSHA256, broker.MechScramSHA512:
		if k.Username == "" {
			return &sinkspec.FieldError{Field: "kafka.username", Msg: "required with sasl_mechanism"}
		}
	default:
		return sinkspec.Errorf("kafka.sasl_mechanism", "%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.SASLMechanism)
	}
	_, err := k.TLS.Config("kafka.tls")
	return err
}

// Config is the sink's configuration for s: own is the director's Kafka,
// used unless s names another cluster; create makes the topic if missing.
func (s *Spec) Config(own broker.ClientConfig, create bool, log *slog.Logger) (Config, error) {
	cc := own
	if k := s.Kafka; k != nil {
		tc, err := k.TLS.Config("kafka.tls")
		if err != nil {
			return Config{}, err
		}
		cc = broker.ClientConfig{Brokers: k.Brokers, SASLMechanism: k.SASLMechanism,
			Username: k.Username, Password: k.Password, TLS: tc}
	}
	return Config{Client: cc, Topic: s.Topic, Logger: log, CreateTopic: create}, nil
}
