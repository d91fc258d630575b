// Package director is the feed runtime: NF message copies flow from Kafka
// through filter and optional correlation to a sink, and the sink's
// acknowledgements become committed offsets (at-least-once). Copy feeds of
// one set of source topics share one reader (tap.go) and keep their
// offsets in consumer groups of their own; xdr feeds read on their own.
package director

import (
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/sink/filesink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/http2sink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/kafkasink"
	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

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

	// Each sink's part of the spec, declared (and checked) by its package;
	// their fields sit at the top level of the JSON.
	SyntheticSpec // synthetic: endpoint, mappings (also a pcap file feed's), packets
	HTTP2Spec     // http2 (and xdr records to a URL): url, fire_and_forget
	KafkaSpec     // kafka (and xdr records to a topic): topic, kafka

	// ExactlyOnce produces each poll's copies in a Kafka transaction with
	// the poll's offsets (txnfeed.go): consumers reading with
	// isolation.level=read_committed see every copy once. Kafka feeds (and
	// xdr feeds to a topic) to the director's own Kafka only.
	ExactlyOnce bool `json:"exactly_once,omitempty"`

	TLS *TLSSpec `json:"tls,omitempty"` // the synthetic or http2 connection's

	// xdr: correlation options; the records go to topic, url or file.
	XDR *XDRSpec `json:"xdr,omitempty"`
	// file (and xdr feeds writing files): where and how files are written.
	File *FileSpec `json:"file,omitempty"`
}

// The sinks' parts of a FeedSpec, as their packages declare them.
type (
	SyntheticSpec = synthetic.Spec
	AddrMapping   = synthetic.AddrMapping
	PacketSpec    = synthetic.PacketSpec
	HTTP2Spec     = http2sink.Spec
	KafkaSpec     = kafkasink.Spec
	KafkaTarget   = kafkasink.Target
	FileSpec      = filesink.Spec
	TLSSpec       = sinkspec.TLS
)

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
