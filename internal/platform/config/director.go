package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// directorFlags registers the data director's flags: the Kafka broker or
// cluster, the feeds, traces, captures and records, the HTTP/2 ingest and
// two-site redundancy.
func directorFlags(fs *flag.FlagSet, c *Serve) {
	fs.BoolVar(&c.Director, "director", true, "run the data director (Kafka broker or client, feeds, HTTP/2 ingest)")
	fs.StringVar(&c.KafkaAddr, "kafka-addr", ":9092", "listen address of the embedded Kafka broker (ignored with -kafka-brokers)")
	fs.StringVar(&c.KafkaAdvertisedAddr, "kafka-advertised-addr", "", "host:port the embedded broker tells clients (NFs) to connect to (default: -kafka-addr; for an unspecified host, this host's address on its default route, else 127.0.0.1)")
	fs.StringVar(&c.KafkaBrokers, "kafka-brokers", "", "comma-separated host:port of an existing Kafka cluster; when set, no embedded broker is started")
	fs.BoolVar(&c.KafkaCreateTopics, "kafka-create-topics", true, "create missing NF topics in an external Kafka cluster")
	fs.StringVar(&c.KafkaTopics, "kafka-topics", "SCP=12,NRF=6,SEPP=6,PCF=6,BSF=6,NON_ORACLE=6,DIAMETER=6", "NF topics and partition counts: NAME=PARTITIONS,...; NON_ORACLE takes the copies of NF types without a topic of their own, DIAMETER the Diameter copies of any NF")
	fs.DurationVar(&c.KafkaRetention, "kafka-retention", 5*time.Minute, "retention of the embedded broker's topics")
	fs.Int64Var(&c.KafkaRetentionBytes, "kafka-retention-bytes", 1<<30, "size cap per partition of the embedded broker's topics")
	fs.IntVar(&c.KafkaMaxMessageBytes, "kafka-max-message-bytes", 1<<20, "largest record batch the embedded broker accepts")
	fs.BoolVar(&c.KafkaAllowAnonymous, "kafka-allow-anonymous", false, "embedded broker: let clients from any host use it without a credential (the copies are subscriber data: warned at every start, alarmed while on)")
	fs.BoolVar(&c.KafkaLocalAnonymous, "kafka-local-anonymous", true, "embedded broker: let clients on this host use it without a credential (clients from other hosts authenticate: the NF credential, kafka-nf-password in the data dir)")
	fs.IntVar(&c.KafkaMaxRequestBytes, "kafka-max-request-bytes", 100<<20, "largest request the embedded broker reads (Kafka's socket.request.max.bytes): a larger one is refused before it is read, and its connection closed")
	fs.StringVar(&c.KafkaSASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (embedded broker: required of clients; external: used to connect)")
	fs.StringVar(&c.KafkaUsername, "kafka-username", "", "SASL user name")
	fs.StringVar(&c.KafkaPassword, "kafka-password", "", "SASL password")
	fs.BoolVar(&c.KafkaTLS, "kafka-tls", false, "TLS on the Kafka connection (embedded broker: needs -kafka-tls-cert/-kafka-tls-key)")
	fs.StringVar(&c.KafkaTLSCert, "kafka-tls-cert", "", "PEM certificate (embedded broker's server cert, or client cert for an external cluster)")
	fs.StringVar(&c.KafkaTLSKey, "kafka-tls-key", "", "PEM private key for -kafka-tls-cert")
	fs.StringVar(&c.KafkaTLSCA, "kafka-tls-ca", "", "PEM CA bundle to verify an external cluster")
	fs.BoolVar(&c.KafkaTLSInsecure, "kafka-tls-insecure", false, "do not verify the external cluster's certificate (testing only)")

	fs.DurationVar(&c.KafkaSessionTimeout, "kafka-session-timeout", 45*time.Second, "how long the feeds' consumer groups keep a node's partitions after it stops heartbeating (paused, cut off, killed) before giving them to the other nodes; within the cluster's group.min/max.session.timeout.ms (embedded broker: 6s to 5m)")
	fs.StringVar(&c.CallsTopic, "calls-topic", "CALLS", "Kafka topic every CURRI decision is produced into as a call record (needs the director's Kafka: embedded or -kafka-brokers); feeds take it as a source; empty: no call records")
	fs.IntVar(&c.TraceMax, "trace-max", 5, "subscriber traces running at once on this node")
	fs.IntVar(&c.TraceMaxMinutes, "trace-max-minutes", 240, "longest subscriber trace, minutes")
	fs.Int64Var(&c.TraceMaxBytes, "trace-max-bytes", 256<<20, "largest capture of a subscriber trace (pcap, and JSON lines, each)")
	fs.DurationVar(&c.TraceRetention, "trace-retention", 24*time.Hour, "a subscriber trace's files are kept this long after it ends, then deleted")
	fs.IntVar(&c.CaptureMax, "capture-max", 4, "live captures (GET /api/v1/capture, signalbox extcap) streaming at once from this node; more are refused (429)")
	fs.DurationVar(&c.XDRStoreMaxAge, "xdr-store-max-age", 7*24*time.Hour, "the transaction records the xdr feeds make are kept (data-dir/xdrs, searchable at /api/v1/xdrs) this long")
	fs.Int64Var(&c.XDRStoreMaxBytes, "xdr-store-max-bytes", 10<<30, "and up to this many bytes of compressed segments, oldest out first")
	fs.StringVar(&c.XDRStoreCodec, "xdr-store-codec", "s2", "compression of new xDR segments: s2 (less CPU per record) or zstd (fewer bytes: longer retention in -xdr-store-max-bytes); segments of either are read")
	fs.BoolVar(&c.FeedSoloReads, "feed-solo-reads", false, "give every feed its own Kafka consumer; by default the copy feeds of the same source topics share one reader (each copy fetched and decoded once), each keeping its own sink, pace and consumer-group offsets")

	fs.StringVar(&c.IngestAddr, "ingest-addr", ":8090", "listen address of the HTTP/2 copy ingest (POST /v1/copies; h2c, or h2 with TLS); empty disables it")
	fs.StringVar(&c.IngestTLSCert, "ingest-tls-cert", "", "PEM certificate: serve ingest over h2 (TLS)")
	fs.StringVar(&c.IngestTLSKey, "ingest-tls-key", "", "PEM private key for -ingest-tls-cert")

	fs.StringVar(&c.Site, "site", "", "two-site redundancy: this site's name (letters, digits, -); with -peer-url and -peer-kafka-brokers")
	fs.StringVar(&c.PeerSite, "peer-site", "", "two-site redundancy: the peer site's name (its -site)")
	fs.StringVar(&c.PeerURL, "peer-url", "", "two-site redundancy: the peer site's API base URL (http[s]://host:port)")
	fs.StringVar(&c.PeerToken, "peer-token", "", "two-site redundancy: an admin token of the peer site's API")
	fs.StringVar(&c.PeerKafkaBrokers, "peer-kafka-brokers", "", "two-site redundancy: comma-separated host:port of the peer site's Kafka, which this site's copies are mirrored into (same SASL/TLS settings as -kafka-*)")
	fs.DurationVar(&c.SiteTakeover, "site-takeover", 15*time.Second, "two-site redundancy: how long the peer site may not answer before this site runs the peer's feeds")
}

// Topic is an NF topic and its partition count.
type Topic struct {
	Name       string
	Partitions int
}

// ParseTopics parses "SCP=12,NRF=6".
func ParseTopics(s string) ([]Topic, error) {
	var out []Topic
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME=PARTITIONS", part)
		}
		p, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || p < 1 || p > 1000 {
			return nil, fmt.Errorf("%q: partitions must be 1..1000", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("topic %s given twice", name)
		}
		seen[name] = true
		out = append(out, Topic{Name: name, Partitions: p})
	}
	if len(out) == 0 {
		return nil, errors.New("no topics")
	}
	return out, nil
}
