// Package director is the feed runtime: NF message copies flow from Kafka
// (one consumer group per feed) through filter and optional correlation to a
// sink; the sink's acknowledgements become committed offsets (at-least-once).
package director

// Feed types.
const (
	TypeSynthetic = "synthetic"
	TypeHTTP2     = "http2"
	TypeKafka     = "kafka"
)

// FeedSpec is a feed as the API takes it and the store keeps it (JSON).
type FeedSpec struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Sources    []string `json:"sources"`              // NF types (topics), e.g. SCP, NRF
	Directions []string `json:"directions,omitempty"` // message directions; empty = all
	Enabled    *bool    `json:"enabled,omitempty"`    // default true
	Start      string   `json:"start,omitempty"`      // "latest" (default) or "earliest"
	Filter     string   `json:"filter,omitempty"`     // filter expression (see issue: filters)

	// synthetic
	Endpoint string        `json:"endpoint,omitempty"` // host:port
	Mappings []AddrMapping `json:"mappings,omitempty"` // nf-fqdn / nf-instance-id -> ip:port

	// http2
	URL           string `json:"url,omitempty"`
	FireAndForget bool   `json:"fire_and_forget,omitempty"`

	// kafka
	Topic string       `json:"topic,omitempty"`
	Kafka *KafkaTarget `json:"kafka,omitempty"` // nil = the director's own Kafka

	TLS *TLSSpec `json:"tls,omitempty"`
}

// AddrMapping maps an NF (by fqdn or instance id) to an L3/L4 address used in
// synthetic packets when the copy carries none.
type AddrMapping struct {
	NFFQDN       string `json:"nf_fqdn,omitempty"`
	NFInstanceID string `json:"nf_instance_id,omitempty"`
	Addr         string `json:"addr"` // ip:port
}

// KafkaTarget is an external Kafka cluster a kafka feed produces to.
type KafkaTarget struct {
	Brokers       []string `json:"brokers"`
	SASLMechanism string   `json:"sasl_mechanism,omitempty"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	Username      string   `json:"username,omitempty"`
	Password      string   `json:"password,omitempty"`
	TLS           *TLSSpec `json:"tls,omitempty"`
}

// TLSSpec is client-side TLS for a feed's connection.
type TLSSpec struct {
	Enabled            bool   `json:"enabled"`
	CAFile             string `json:"ca_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}
