package director

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/sink/http2sink"
	"github.com/signalbox/signalbox/internal/sink/kafkasink"
	"github.com/signalbox/signalbox/internal/sink/synthetic"
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
		return synthetic.New(synthetic.Config{Endpoint: spec.Endpoint, TLS: tc, Mappings: maps, Logger: log})
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
		return m.extSink(spec)
	}
	return nil, fmt.Errorf("feed %q: unknown type %q", spec.Name, spec.Type)
}
