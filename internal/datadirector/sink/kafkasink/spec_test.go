package kafkasink

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

func TestSpecValidateNamesFields(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := func(topic string) bool { return topic == "NRF" || topic == "signalbox.dlq" }
	ext := func(mod func(*Target)) *Target {
		k := &Target{Brokers: []string{"k1:9093"}}
		mod(k)
		return k
	}
	for _, tt := range []struct {
		name  string
		spec  Spec
		field string
	}{
		{"valid", Spec{Topic: "probe.out"}, ""},
		{"valid external", Spec{Topic: "NRF", Kafka: ext(func(k *Target) { k.SASLMechanism, k.Username = "SCRAM-SHA-512", "u" })}, ""},
		{"topic missing", Spec{}, "topic"},
		{"topic invalid", Spec{Topic: "a b"}, "topic"},
		{"topic loops", Spec{Topic: "NRF"}, "topic"},
		{"dead letters loop", Spec{Topic: "signalbox.dlq"}, "topic"},
		{"brokers", Spec{Topic: "x", Kafka: &Target{}}, "kafka.brokers"},
		{"broker addr", Spec{Topic: "x", Kafka: &Target{Brokers: []string{"k1:9093", "k2"}}}, "kafka.brokers[1]"},
		{"mechanism", Spec{Topic: "x", Kafka: ext(func(k *Target) { k.SASLMechanism = "GSSAPI" })}, "kafka.sasl_mechanism"},
		{"username", Spec{Topic: "x", Kafka: ext(func(k *Target) { k.SASLMechanism = broker.MechPlain })}, "kafka.username"},
		{"tls ca", Spec{Topic: "x", Kafka: ext(func(k *Target) { k.TLS = &sinkspec.TLS{Enabled: true, CAFile: garbage} })}, "kafka.tls.ca_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(own); sinkspec.FieldOf(err) != tt.field {
				t.Fatalf("err = %v, want a *FieldError for %q", err, tt.field)
			}
		})
	}
}

func TestSpecConfigPicksTheCluster(t *testing.T) {
	own := broker.ClientConfig{Brokers: []string{"own:9092"}}
	c, err := (&Spec{Topic: "out"}).Config(own, true, nil)
	if err != nil || c.Client.Brokers[0] != "own:9092" || c.Topic != "out" || !c.CreateTopic {
		t.Fatalf("own cluster: %+v, %v", c, err)
	}
	ext := &Target{Brokers: []string{"ext:9093"}, SASLMechanism: broker.MechScramSHA256, Username: "u", Password: "p"}
	c, err = (&Spec{Topic: "out", Kafka: ext}).Config(own, false, nil)
	if err != nil || c.Client.Brokers[0] != "ext:9093" || c.Client.SASLMechanism != broker.MechScramSHA256 ||
		c.Client.Username != "u" || c.Client.Password != "p" || c.CreateTopic {
		t.Fatalf("external cluster: %+v, %v", c, err)
	}
}
