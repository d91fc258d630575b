package director

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

func TestValidateNamesFields(t *testing.T) {
	m := offlineManager(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(mod func(*FeedSpec)) FeedSpec {
		s := FeedSpec{Name: "probe-1", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "10.0.0.1:5000"}}
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
		{"url empty", ok(func(s *FeedSpec) { s.Type = TypeHTTP2 }), "url"},
		{"topic missing", ok(func(s *FeedSpec) { s.Type = TypeKafka }), "topic"},
		{"topic loops", ok(func(s *FeedSpec) { s.Type, s.Topic = TypeKafka, "NRF" }), "topic"},
		{"kafka brokers", ok(func(s *FeedSpec) { s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{} }), "kafka.brokers"},
		{"kafka tls ca", ok(func(s *FeedSpec) {
			s.Type, s.Topic, s.Kafka = TypeKafka, "x", &KafkaTarget{Brokers: []string{"k1:1"}, TLS: &TLSSpec{Enabled: true, CAFile: garbage}}
		}), "kafka.tls.ca_file"},
		{"tls ca garbage", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{Enabled: true, CAFile: garbage} }), "tls.ca_file"},
		{"xdr without an output", ok(func(s *FeedSpec) { s.Type = TypeXDR }), "topic"},
		{"xdr with two outputs", ok(func(s *FeedSpec) { s.Type, s.Topic, s.URL = TypeXDR, "xdr.out", "https://a:8443/x" }), "topic"},
		{"valid xdr to a url", ok(func(s *FeedSpec) { s.Type, s.URL = TypeXDR, "https://a:8443/x" }), ""},
		{"xdr url", ok(func(s *FeedSpec) { s.Type, s.URL = TypeXDR, "ftp://a/x" }), "url"},
		{"xdr topic loops", ok(func(s *FeedSpec) { s.Type, s.Topic = TypeXDR, "SCP" }), "topic"},
		{"xdr to another cluster", ok(func(s *FeedSpec) { s.Type, s.Topic, s.Kafka = TypeXDR, "x", &KafkaTarget{} }), "kafka.brokers"},
		{"valid xdr to files", ok(func(s *FeedSpec) { s.Type, s.File = TypeXDR, &FileSpec{Dir: dir} }), ""},
		{"xdr files as pcap", ok(func(s *FeedSpec) { s.Type, s.File = TypeXDR, &FileSpec{Dir: dir, Format: "pcap"} }), "file.format"},
		{"xdr timeout", ok(func(s *FeedSpec) { s.Type, s.Topic, s.XDR = TypeXDR, "x", &XDRSpec{Timeout: "soon"} }), "xdr.timeout"},
		{"file without a spec", ok(func(s *FeedSpec) { s.Type = TypeFile }), "file"},
		{"file dir", ok(func(s *FeedSpec) { s.Type, s.File = TypeFile, &FileSpec{} }), "file.dir"},
		{"files on a synthetic feed", ok(func(s *FeedSpec) { s.File = &FileSpec{Dir: dir} }), "file"},
		{"xdr options on a synthetic feed", ok(func(s *FeedSpec) { s.XDR = &XDRSpec{} }), "xdr"},
		{"tls disabled ignores files", ok(func(s *FeedSpec) { s.TLS = &TLSSpec{CAFile: garbage} }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := m.Validate(&tt.spec); sinkspec.FieldOf(err) != tt.field {
				t.Fatalf("err = %v, want a *FieldError for %q", err, tt.field)
			}
		})
	}
}
