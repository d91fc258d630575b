package director

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/sink/filesink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/http2sink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/kafkasink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

func parseAddrPort(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("%q: want ip:port", s)
	}
	return ap, nil
}

// defaultSink builds the sink a spec names.
func (m *Manager) defaultSink(spec *FeedSpec) (Sink, error) {
	log := m.log.With("feed", spec.Name)
	tc, err := tlsConfig(spec.TLS, "tls")
	if err != nil {
		return nil, err
	}
	switch spec.Type {
	case TypeSynthetic:
		maps := make([]synthetic.Mapping, 0, len(spec.Mappings))
		for _, mp := range spec.Mappings {
			ap, err := parseAddrPort(mp.Addr)
			if err != nil {
				return nil, err
			}
			maps = append(maps, synthetic.Mapping{NFFQDN: mp.NFFQDN, NFInstanceID: mp.NFInstanceID, Addr: ap})
		}
		cfg := synthetic.Config{Endpoint: spec.Endpoint, TLS: tc, Mappings: maps, Logger: log}
		if p := spec.Packets; p != nil {
			cfg.MSS, cfg.MaxFlows, cfg.KeepPorts, cfg.NoHandshake = p.MSS, p.MaxFlows, p.KeepPorts, p.NoHandshake
		}
		return synthetic.New(cfg)
	case TypeKafka:
		cc := m.cfg.Client
		if k := spec.Kafka; k != nil {
			ktc, err := tlsConfig(k.TLS, "kafka.tls")
			if err != nil {
				return nil, err
			}
			cc = broker.ClientConfig{Brokers: k.Brokers, SASLMechanism: k.SASLMechanism,
				Username: k.Username, Password: k.Password, TLS: ktc}
		}
		return kafkasink.New(kafkasink.Config{Client: cc, Topic: spec.Topic, Logger: log, CreateTopic: m.cfg.CreateTopics})
	case TypeHTTP2:
		if !strings.HasPrefix(spec.URL, "https:") {
			tc = nil // the sink refuses TLS settings on an h2c URL
		}
		return http2sink.New(http2sink.Config{URL: spec.URL, TLS: tc, FireAndForget: spec.FireAndForget, Logger: log})
	case TypeFile, TypeXDR:
		return m.fileOrRecordSink(spec)
	}
	return nil, fmt.Errorf("feed %q: unknown type %q", spec.Name, spec.Type)
}

// fileFormat is the spec's format with its default: pcap for copies, jsonl
// for transaction and call records.
func (m *Manager) fileFormat(spec *FeedSpec) string {
	if spec.File.Format != "" {
		return spec.File.Format
	}
	if spec.Type == TypeXDR || m.isCallsFeed(spec) {
		return filesink.FormatJSONL
	}
	return filesink.FormatPCAP
}

// fileSink builds the file target of a file or xdr feed.
func (m *Manager) fileSink(spec *FeedSpec) (Sink, error) {
	fs := spec.File
	return filesink.New(filesink.Config{
		Dir: fs.Dir, Prefix: spec.Name, Format: m.fileFormat(spec),
		RotateBytes: fs.RotateBytes, RotateInterval: time.Duration(fs.RotateSeconds) * time.Second, Keep: fs.Keep,
		Logger: m.log.With("feed", spec.Name),
	})
}

// fileOrRecordSink builds a file feed's files, or an xdr feed's record
// output (records travel as copies whose Raw is the record's JSON and whose
// correlation id is the key).
func (m *Manager) fileOrRecordSink(spec *FeedSpec) (Sink, error) {
	switch {
	case spec.Type == TypeFile || spec.File != nil:
		return m.fileSink(spec)
	case spec.Topic != "":
		s := *spec
		s.Type = TypeKafka
		return m.defaultSink(&s)
	case spec.URL != "":
		s := *spec
		s.Type = TypeHTTP2
		return m.defaultSink(&s)
	}
	return nil, fmt.Errorf("feed %q: no output", spec.Name)
}
