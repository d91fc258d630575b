package director

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/signalbox/signalbox/internal/datadirector/sink/filesink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/http2sink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/kafkasink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// A sinkKind is what the director knows of one sink package: how to check a
// feed spec's part for it and how to build the sink from it. The package
// declares its part of the JSON (a Spec, which FeedSpec embeds or holds),
// checks it (Validate) and turns it into its Config; a new sink is such a
// package and a row here.
type sinkKind struct {
	// validate checks the spec's part for the sink; records is for an xdr
	// feed's output (transaction records carried as copies).
	validate func(m *Manager, spec *FeedSpec, records bool) error
	// build makes the sink; tc is the spec's TLS (nil: none), for the
	// sinks that connect with it.
	build func(m *Manager, spec *FeedSpec, tc *tls.Config, log *slog.Logger) (Sink, error)
}

// sinkKinds is every sink, by the feed type that writes to it. An xdr feed
// is a correlating stage in front of one of them (recordOutput).
var sinkKinds = map[string]sinkKind{
	TypeSynthetic: {
		validate: func(_ *Manager, spec *FeedSpec, _ bool) error { return spec.SyntheticSpec.Validate() },
		build: func(_ *Manager, spec *FeedSpec, tc *tls.Config, log *slog.Logger) (Sink, error) {
			cfg, err := spec.SyntheticSpec.Config(tc, log)
			if err != nil {
				return nil, err
			}
			return synthetic.New(cfg)
		},
	},
	TypeHTTP2: {
		validate: func(_ *Manager, spec *FeedSpec, _ bool) error { return spec.HTTP2Spec.Validate() },
		build: func(_ *Manager, spec *FeedSpec, tc *tls.Config, log *slog.Logger) (Sink, error) {
			return http2sink.New(spec.HTTP2Spec.Config(tc, log))
		},
	},
	TypeKafka: {
		validate: func(m *Manager, spec *FeedSpec, _ bool) error { return spec.KafkaSpec.Validate(m.ownTopic) },
		build: func(m *Manager, spec *FeedSpec, _ *tls.Config, log *slog.Logger) (Sink, error) {
			cfg, err := spec.KafkaSpec.Config(m.cfg.Client, m.cfg.CreateTopics, log)
			if err != nil {
				return nil, err
			}
			return kafkasink.New(cfg)
		},
	},
	TypeFile: {
		validate: func(_ *Manager, spec *FeedSpec, records bool) error {
			if spec.File == nil {
				return &FieldError{Field: "file", Msg: `required for a file feed: {"dir":...,"format":"pcap|jsonl"}`}
			}
			if err := sinkspec.Within("file", spec.File.Validate(records)); err != nil {
				return err
			}
			_, err := spec.ParseMappings() // a pcap's NF addresses, as a synthetic feed's
			return err
		},
		build: func(m *Manager, spec *FeedSpec, _ *tls.Config, log *slog.Logger) (Sink, error) {
			format := filesink.FormatPCAP // copies; records are JSON
			if spec.Type == TypeXDR || m.isCallsFeed(spec) {
				format = filesink.FormatJSONL
			}
			cfg := spec.File.Config(spec.Name, format, log)
			var err error
			if cfg.Mappings, err = spec.ParseMappings(); err != nil {
				return nil, err
			}
			return filesink.New(cfg)
		},
	},
}

// recordOutput is the sink an xdr feed writes its records to: the one of
// topic, url and file its spec sets ("" unless exactly one).
func recordOutput(spec *FeedSpec) string {
	var outs []string
	if spec.Topic != "" {
		outs = append(outs, TypeKafka)
	}
	if spec.URL != "" {
		outs = append(outs, TypeHTTP2)
	}
	if spec.File != nil {
		outs = append(outs, TypeFile)
	}
	if len(outs) != 1 {
		return ""
	}
	return outs[0]
}

// sinkKindOf is the sink a spec writes to: its type's, or an xdr feed's
// record output.
func sinkKindOf(spec *FeedSpec) (sinkKind, bool) {
	t := spec.Type
	if t == TypeXDR {
		t = recordOutput(spec)
	}
	k, ok := sinkKinds[t]
	return k, ok
}

// defaultSink builds the sink a spec names (an xdr feed's: its record
// output, whose records travel as copies whose Raw is the record's JSON and
// whose correlation id is the key).
func (m *Manager) defaultSink(spec *FeedSpec) (Sink, error) {
	k, ok := sinkKindOf(spec)
	if !ok {
		return nil, fmt.Errorf("feed %q: no sink for type %q", spec.Name, spec.Type)
	}
	tc, err := spec.TLS.Config("tls")
	if err != nil {
		return nil, err
	}
	return k.build(m, spec, tc, m.log.With("feed", spec.Name))
}

// ownTopic reports whether topic, on the director's own Kafka, is one the
// director reads or dead-letters to: a feed into it would loop.
func (m *Manager) ownTopic(topic string) bool {
	return m.sources[topic] || topic == m.cfg.DLQTopic || (topic == m.cfg.CallsTopic && topic != "")
}
