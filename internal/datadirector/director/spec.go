// Package director is the feed runtime: NF message copies flow from Kafka
// through filter and optional correlation to a sink, and the sink's
// acknowledgements become committed offsets (at-least-once). Copy feeds of
// one set of source topics share one reader (tap.go) and keep their
// offsets in consumer groups of their own; xdr feeds read on their own.
package director

import "time"

// Feed types.
const (
	TypeSynthetic = "synthetic"
	TypeHTTP2     = "http2"
	TypeKafka     = "kafka"
	TypeXDR       = "xdr"  // transaction records (see xdrfeed.go)
	TypeFile      = "file" // copies to rotated files (sink/filesink)
)

// FeedSpec is a feed as the API takes it and the store keeps it (JSON).
type FeedSpec struct {
	Name string `json:"name"`
	// Site is, with two-site redundancy (internal/datadirector/site), the site that
	// runs the feed; the other keeps it standing by. The API sets it to
	// the site the feed is created at.
	Site string `json:"site,omitempty"`
	// Created is when the feed was created (the API sets it). A partition
	// the feed has no position on when it starts for another site (a
	// takeover) starts from here (FromCreation).
	Created    *time.Time `json:"created,omitempty"`
	Type       string     `json:"type"`
	Sources    []string   `json:"sources"`              // NF types (topics), e.g. SCP, NRF
	Directions []string   `json:"directions,omitempty"` // message directions; empty = all
	Enabled    *bool      `json:"enabled,omitempty"`    // default true
	Start      string     `json:"start,omitempty"`      // "latest" (default) or "earliest"
	Filter     string     `json:"filter,omitempty"`     // filter expression (see issue: filters)
	// Transactions (with a filter, on a copy feed) also passes the other
	// copies of each transaction a copy the filter passed belongs to (same
	// correlation id), read after it within 5 minutes or before it in the
	// same poll: a response that does not name the subscriber goes with
	// its request.
	Transactions bool `json:"transactions,omitempty"`
	// Sequencing "transaction" writes each transaction's request before its
	// responses fetched with it (sequencer); "" leaves the copies in
	// partition order.
	Sequencing string `json:"sequencing,omitempty"`

	// synthetic
	Endpoint string        `json:"endpoint,omitempty"` // host:port
	Mappings []AddrMapping `json:"mappings,omitempty"` // nf-fqdn / nf-instance-id -> ip:port
	Packets  *PacketSpec   `json:"packets,omitempty"`  // how copies become packets; nil = the defaults

	// http2
	URL           string `json:"url,omitempty"`
	FireAndForget bool   `json:"fire_and_forget,omitempty"`

	// kafka
	Topic string       `json:"topic,omitempty"`
	Kafka *KafkaTarget `json:"kafka,omitempty"` // nil = the director's own Kafka
	// ExactlyOnce produces each poll's copies in a Kafka transaction with
	// the poll's offsets (txnfeed.go): consumers reading with
	// isolation.level=read_committed see every copy once. Kafka feeds to
	// the director's own Kafka only.
	ExactlyOnce bool `json:"exactly_once,omitempty"`

	TLS *TLSSpec `json:"tls,omitempty"`

	// xdr: correlation options; the records go to topic, url or file.
	XDR *XDRSpec `json:"xdr,omitempty"`
	// file (and xdr feeds writing files): where and how files are written.
	File *FileSpec `json:"file,omitempty"`
}

// AddrMapping maps an NF (by fqdn or instance id) to an L3/L4 address used in
// synthetic packets when the copy carries none.
type AddrMapping struct {
	NFFQDN       string `json:"nf_fqdn,omitempty"`
	NFInstanceID string `json:"nf_instance_id,omitempty"`
	Addr         string `json:"addr"` // ip:port
}

// PacketSpec tunes a synthetic feed's packets (synthetic.EncoderOptions).
type PacketSpec struct {
	MSS         int  `json:"mss,omitempty"`          // largest TCP payload per packet; 0 = 1460
	MaxFlows    int  `json:"max_flows,omitempty"`    // flows open at once; 0 = 100000
	KeepPorts   bool `json:"keep_ports,omitempty"`   // server ports as copied, even those Wireshark does not decode as HTTP
	NoHandshake bool `json:"no_handshake,omitempty"` // no SYN/SYN-ACK/ACK opening a flow, no FIN closing it
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

// XDRSpec tunes an xdr feed's correlator; zero values take xdr's defaults.
type XDRSpec struct {
	Timeout    string `json:"timeout,omitempty"`     // Go duration, default 5s
	MaxPending int    `json:"max_pending,omitempty"` // default 200000
	Linger     string `json:"linger,omitempty"`      // Go duration, default 0
	// Rekey routes the copies through an internal topic keyed by
	// correlation id (RekeyTopic) before correlating, so that when the feed
	// runs on several signalbox nodes every copy of a transaction reaches
	// the same node's correlator, whatever NF topic and partition it came
	// from. Costs one more produce and fetch per copy.
	Rekey bool `json:"rekey,omitempty"`
	// The re-key topic is made with these, not the cluster's defaults
	// (a topic that exists keeps its own): partitions (default 12, the
	// most nodes that share the correlation), retention (a Go duration,
	// default 1h: longer than a node's restart, so its share is correlated
	// when it is back) and segment bytes (default 64 MiB).
	RekeyPartitions   int    `json:"rekey_partitions,omitempty"`
	RekeyRetention    string `json:"rekey_retention,omitempty"`
	RekeySegmentBytes int64  `json:"rekey_segment_bytes,omitempty"`
}

// FileSpec is a file target: rotated files in Dir, written atomically.
type FileSpec struct {
	Dir           string `json:"dir"`
	Format        string `json:"format,omitempty"`         // pcap (file feeds' default) or jsonl (xdr feeds: jsonl only)
	RotateBytes   int64  `json:"rotate_bytes,omitempty"`   // default 100 MiB
	RotateSeconds int    `json:"rotate_seconds,omitempty"` // default 300
	Keep          int    `json:"keep,omitempty"`           // finished files kept; default 100
}
