package director

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
)

func TestValidateNamesFields(t *testing.T) {
	m := offlineManager(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(mod func(*FeedSpec)) FeedSpec {
		s := FeedSpec{Name: "probe-1", Type: TypeSynthetic, Sources: []string{"SCP"}, Endpoint: "10.0.0.1:5000"}
		mod(&s)
		return s
	}
	tests := []struct {
		name  string
		spec  FeedSpec
		field string // "" = valid
	}{
		{"valid synthetic", ok(func(*FeedSpec) {}), ""},
		{"valid http2", ok(func(s *FeedSpec) { s.Type, s.URL = TypeHTTP2, "https://probe:8443/copies" }), ""},
		{"valid kafka", ok(func(s *FeedSpec) { s.Type, s.Topic = TypeKafka, "probe.out" }), ""},
		{"valid external kafka", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.Kafka = TypeKafka, "SCP", &KafkaTarget{Brokers: []string{"k1:9093"}, SASLMechanism: "SCRAM-SHA-512", Username: "u"}
		}), ""},
		{"valid exactly once", ok(func(s *FeedSpec) { s.Type, s.Topic, s.ExactlyOnce = TypeKafka, "probe.out", true }), ""},
		{"exactly once not kafka", ok(func(s *FeedSpec) { s.ExactlyOnce = true }), "exactly_once"},
		{"valid exactly once xdr", ok(func(s *FeedSpec) { s.Type, s.Topic, s.ExactlyOnce = TypeXDR, "xdr.out", true }), ""},
		{"exactly once xdr to a url", ok(func(s *FeedSpec) { s.Type, s.URL, s.ExactlyOnce = TypeXDR, "https://a:8443/x", true }), "exactly_once"},
		{"exactly once xdr rekey", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.ExactlyOnce, s.XDR = TypeXDR, "xdr.out", true, &XDRSpec{Rekey: true}
		}), "exactly_once"},
		{"exactly once xdr external", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.ExactlyOnce, s.Kafka = TypeXDR, "x", true, &KafkaTarget{Brokers: []string{"k1:9093"}}
		}), "exactly_once"},
		{"exactly once external", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.ExactlyOnce, s.Kafka = TypeKafka, "x", true, &KafkaTarget{Brokers: []string{"k1:9093"}}
		}), "exactly_once"},
		{"exactly once transactions", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.ExactlyOnce, s.Filter, s.Transactions = TypeKafka, "x", true, `nf_type == "SCP"`, true
		}), "exactly_once"},
		{"name upper case", ok(func(s *FeedSpec) { s.Name = "Probe" }), "name"},
		{"name empty", ok(func(s *FeedSpec) { s.Name = "" }), "name"},
		{"name too long", ok(func(s *FeedSpec) { s.Name = strings.Repeat("a", 65) }), "name"},
		{"type", ok(func(s *FeedSpec) { s.Type = "smtp" }), "type"},
		{"no sources", ok(func(s *FeedSpec) { s.Sources = nil }), "sources"},
		{"unknown source", ok(func(s *FeedSpec) { s.Sources = []string{"SCP", "AMF"} }), "sources[1]"},
		{"dlq as source", ok(func(s *FeedSpec) { s.Sources = []string{broker.DLQTopic} }), "sources[0]"},
		{"duplicate source", ok(func(s *FeedSpec) { s.Sources = []string{"SCP", "SCP"} }), "sources[1]"},
		{"direction", ok(func(s *FeedSpec) { s.Directions = []string{"REQUEST_INGRESS", "SIDEWAYS"} }), "directions[1]"},
		{"start", ok(func(s *FeedSpec) { s.Start = "yesterday" }), "start"},
		{"filter unsupported", ok(func(s *FeedSpec) { s.Filter = "x" }), "filter"},
		{"endpoint", ok(func(s *FeedSpec) { s.Endpoint = "probe" }), "endpoint"},
		{"endpoint port", ok(func(s *FeedSpec) { s.Endpoint = "probe:70000" }), "endpoint"},
		{"mapping addr", ok(func(s *FeedSpec) { s.Mappings = []AddrMapping{{NFFQDN: "a", Addr: "host:1"}} }), "mappings[0].addr"},
		{"mapping key", ok(func(s *FeedSpec) { s.Mappings = []AddrMapping{{Addr: "10.0.0.1:80"}} }), "mappings[0]"},
		{"url scheme", ok(func(s *FeedSpec) { s.Type, s.URL = TypeHTTP2, "ftp://x/y" }), "url"},
		{"url empty", ok(func(s *FeedSpec) { s.Type = TypeHTTP2 }), "url"},
		{"topic missing", ok(func(s *FeedSpec) { s.Type = TypeKafka }), "topic"},
		{"topic invalid", ok(func(s *FeedSpec) { s.Type, s.Topic = TypeKafka, "a b" }), "topic"},
		{"topic loops", ok(func(s *FeedSpec) { s.Type, s.Topic = TypeKafka, "NRF" }), "topic"},
		{"kafka brokers", ok(func(s *FeedSpec) { s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{} }), "kafka.brokers"},
		{"kafka broker addr", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{Brokers: []string{"k1"}}
		}), "kafka.brokers[0]"},
		{"kafka mechanism", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{Brokers: []string{"k1:1"}, SASLMechanism: "GSSAPI"}
		}), "kafka.sasl_mechanism"},
		{"kafka tls ca", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{Brokers: []string{"k1:1"}, TLS: &TLSSpec{Enabled: true, CAFile: garbage}}
		}), "kafka.tls.ca_file"},
		{"tls ca missing", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{Enabled: true, CAFile: filepath.Join(dir, "nope.pem")} }), "tls.ca_file"},
		{"tls ca garbage", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{Enabled: true, CAFile: garbage} }), "tls.ca_file"},
		{"tls key without cert", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{Enabled: true, KeyFile: garbage} }), "tls.cert_file"},
		{"tls bad pair", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{Enabled: true, CertFile: garbage, KeyFile: garbage} }), "tls.cert_file"},
		{"tls disabled ignores files", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{CAFile: garbage} }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate(&tt.spec)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FieldError for %s", err, tt.field)
			}
			if fe.Field != tt.field || fe.Msg == "" {
				t.Fatalf("field = %q (%s), want %q", fe.Field, fe.Msg, tt.field)
			}
		})
	}
}
