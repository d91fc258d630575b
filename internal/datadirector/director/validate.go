package director

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/filesink"
)

// feedName keeps feed names usable in URLs, metric labels, consumer group
// ids and file names.
var feedName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// CheckFeedName returns a *FieldError unless name is a valid feed name.
func CheckFeedName(name string) error {
	if !feedName.MatchString(name) {
		return &FieldError{Field: "name", Msg: fmt.Sprintf("%q is not a valid feed name (lower-case letters, digits, _ . and -, starting with a letter or digit, at most 64)", name)}
	}
	return nil
}

// Validate checks a feed spec and returns a *FieldError naming the first
// field at fault. It reads TLS files, so it also catches unreadable ones.
func (m *Manager) Validate(spec *FeedSpec) error { return m.validate(spec, false) }

// validate is Validate for a feed's stage: a re-keyed xdr feed's
// correlating stage (correlating) reads the internal re-key topic, not an
// NF topic.
func (m *Manager) validate(spec *FeedSpec, correlating bool) error {
	if spec == nil {
		return &FieldError{Field: "feed", Msg: "missing"}
	}
	if err := CheckFeedName(spec.Name); err != nil {
		return err
	}
	switch spec.Type {
	case TypeSynthetic, TypeHTTP2, TypeKafka, TypeXDR, TypeFile:
	default:
		return &FieldError{Field: "type", Msg: fmt.Sprintf("%q: want synthetic, http2, kafka, xdr or file", spec.Type)}
	}
	if len(spec.Sources) == 0 {
		return &FieldError{Field: "sources", Msg: "at least one NF type is required"}
	}
	seen := map[string]bool{}
	for i, s := range spec.Sources {
		if !m.sources[s] && !correlating && !(s == m.cfg.CallsTopic && s != "") {
			return &FieldError{Field: "sources[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf("%q is not a known NF type (topics: %v)", s, m.sourceNames)}
		}
		if seen[s] {
			return &FieldError{Field: "sources[" + strconv.Itoa(i) + "]", Msg: fmt.Sprintf("%q listed twice", s)}
		}
		seen[s] = true
	}
	if m.isCallsFeed(spec) {
		if err := m.validateCallsFeed(spec); err != nil {
			return err
		}
	}
	for i, d := range spec.Directions {
		if nfcopy.ParseDirection(d) == nfcopy.DirUnknown {
			return &FieldError{Field: "directions[" + strconv.Itoa(i) + "]",
				Msg: fmt.Sprintf("%q: want REQUEST_INGRESS, REQUEST_EGRESS, RESPONSE_INGRESS or RESPONSE_EGRESS", d)}
		}
	}
	switch spec.Start {
	case "", "latest", "earliest":
	default:
		return &FieldError{Field: "start", Msg: fmt.Sprintf("%q: want latest or earliest", spec.Start)}
	}
	if spec.Transactions && (spec.Filter == "" || spec.Type == TypeXDR || m.isCallsFeed(spec)) {
		return &FieldError{Field: "transactions", Msg: "follows the transactions of the copies a filter passes: needs a filter, on a feed of NF copies"}
	}
	if spec.ExactlyOnce {
		switch {
		case spec.Type == TypeXDR && spec.Topic == "":
			return &FieldError{Field: "exactly_once", Msg: "an exactly-once xdr feed writes its records to a topic: a URL or files take no Kafka transaction"}
		case spec.Type == TypeXDR && spec.XDR != nil && spec.XDR.Rekey:
			return &FieldError{Field: "exactly_once", Msg: "does not combine with xdr.rekey yet: the re-key stage's watermarks are not transactional"}
		case spec.Type != TypeKafka && spec.Type != TypeXDR:
			return &FieldError{Field: "exactly_once", Msg: "exactly-once delivery is for kafka feeds and xdr feeds to a topic: other targets take no Kafka transaction"}
		case spec.Kafka != nil:
			return &FieldError{Field: "exactly_once", Msg: "needs the director's own Kafka as the target: a transaction cannot span clusters (leave out \"kafka\")"}
		case spec.Transactions:
			return &FieldError{Field: "exactly_once", Msg: "does not combine with transactions: a copy held for a later poll would be committed before it is sent"}
		case m.isCallsFeed(spec):
			return &FieldError{Field: "exactly_once", Msg: "is for feeds of NF copies"}
		}
	}
	if spec.Sequencing != "" && spec.Sequencing != SequencingTransaction {
		return &FieldError{Field: "sequencing", Msg: fmt.Sprintf("%q: want transaction, or leave it out", spec.Sequencing)}
	}
	if err := m.validateOutputs(spec); err != nil {
		return err
	}
	switch spec.Type {
	case TypeSynthetic:
		if err := hostPort(spec.Endpoint); err != nil {
			return &FieldError{Field: "endpoint", Msg: err.Error()}
		}
		for i, mp := range spec.Mappings {
			f := "mappings[" + strconv.Itoa(i) + "]"
			if mp.NFFQDN == "" && mp.NFInstanceID == "" {
				return &FieldError{Field: f, Msg: "needs nf_fqdn or nf_instance_id"}
			}
			if _, err := parseAddrPort(mp.Addr); err != nil {
				return &FieldError{Field: f + ".addr", Msg: err.Error()}
			}
		}
		if p := spec.Packets; p != nil {
			if p.MSS != 0 && (p.MSS < 536 || p.MSS > 65495) {
				return &FieldError{Field: "packets.mss", Msg: fmt.Sprintf("%d: want 536 to 65495 bytes (0: 1460)", p.MSS)}
			}
			if p.MaxFlows != 0 && (p.MaxFlows < 4 || p.MaxFlows > 1<<20) {
				return &FieldError{Field: "packets.max_flows", Msg: fmt.Sprintf("%d: want 4 to 1048576 (0: 100000)", p.MaxFlows)}
			}
		}
	case TypeHTTP2:
		u, err := url.Parse(spec.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &FieldError{Field: "url", Msg: fmt.Sprintf("%q: want an http:// or https:// URL", spec.URL)}
		}
	case TypeKafka:
		if spec.Topic == "" {
			return &FieldError{Field: "topic", Msg: "required for a kafka feed"}
		}
		if err := broker.ValidateTopicName(spec.Topic); err != nil {
			return &FieldError{Field: "topic", Msg: err.Error()}
		}
		if spec.Kafka == nil && (m.sources[spec.Topic] || spec.Topic == m.cfg.DLQTopic || (spec.Topic == m.cfg.CallsTopic && spec.Topic != "")) {
			return &FieldError{Field: "topic", Msg: fmt.Sprintf("%q is a director topic; feeding it would loop", spec.Topic)}
		}
		if k := spec.Kafka; k != nil {
			if len(k.Brokers) == 0 {
				return &FieldError{Field: "kafka.brokers", Msg: "at least one host:port is required"}
			}
			for i, b := range k.Brokers {
				if err := hostPort(b); err != nil {
					return &FieldError{Field: "kafka.brokers[" + strconv.Itoa(i) + "]", Msg: err.Error()}
				}
			}
			switch k.SASLMechanism {
			case "":
			case broker.MechPlain, broker.MechScramSHA256, broker.MechScramSHA512:
				if k.Username == "" {
					return &FieldError{Field: "kafka.username", Msg: "required with sasl_mechanism"}
				}
			default:
				return &FieldError{Field: "kafka.sasl_mechanism", Msg: fmt.Sprintf("%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.SASLMechanism)}
			}
			if _, err := tlsConfig(k.TLS, "kafka.tls"); err != nil {
				return err
			}
		}
	}
	if _, err := tlsConfig(spec.TLS, "tls"); err != nil {
		return err
	}
	return nil
}

func hostPort(s string) error {
	h, p, err := net.SplitHostPort(s)
	if err != nil || h == "" {
		return fmt.Errorf("%q: want host:port", s)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be 1-65535", s)
	}
	return nil
}

// tlsConfig builds the client TLS config of a spec, naming the field of any
// file that cannot be read or parsed. nil or disabled gives nil.
func tlsConfig(t *TLSSpec, field string) (*tls.Config, error) {
	if t == nil || !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // operator's explicit choice
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &FieldError{Field: field + ".ca_file", Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Field: field + ".ca_file", Msg: fmt.Sprintf("%s: no PEM certificate found", t.CAFile)}
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		f := field + ".key_file"
		if t.CertFile == "" {
			f = field + ".cert_file"
		}
		return nil, &FieldError{Field: f, Msg: "cert_file and key_file go together"}
	}
	if t.CertFile != "" {
		if _, err := os.Stat(t.CertFile); err != nil {
			return nil, &FieldError{Field: field + ".cert_file", Msg: err.Error()}
		}
		if _, err := os.Stat(t.KeyFile); err != nil {
			return nil, &FieldError{Field: field + ".key_file", Msg: err.Error()}
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &FieldError{Field: field + ".cert_file", Msg: err.Error()}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// validateOutputs checks the filter, and the outputs of the xdr and file
// feed types.
func (m *Manager) validateOutputs(spec *FeedSpec) error {
	if _, _, _, err := compileFilter(spec, m.isCallsFeed(spec)); err != nil {
		return err
	}
	switch spec.Type {
	case TypeFile:
		if spec.File == nil {
			return &FieldError{Field: "file", Msg: `required for a file feed: {"dir":...,"format":"pcap|jsonl"}`}
		}
		if err := validateFile(spec.File, false); err != nil {
			return err
		}
	case TypeXDR:
		outs := 0
		for _, set := range []bool{spec.Topic != "", spec.URL != "", spec.File != nil} {
			if set {
				outs++
			}
		}
		if outs != 1 {
			return &FieldError{Field: "topic", Msg: "an xdr feed needs exactly one output: topic, url or file"}
		}
		if spec.File != nil {
			if err := validateFile(spec.File, true); err != nil {
				return err
			}
		}
		if spec.Topic != "" {
			if err := broker.ValidateTopicName(spec.Topic); err != nil {
				return &FieldError{Field: "topic", Msg: err.Error()}
			}
			if spec.Kafka == nil && (m.sources[spec.Topic] || spec.Topic == m.cfg.DLQTopic || (spec.Topic == m.cfg.CallsTopic && spec.Topic != "")) {
				return &FieldError{Field: "topic", Msg: fmt.Sprintf("%q is a director topic; feeding it would loop", spec.Topic)}
			}
		}
		if spec.URL != "" {
			u, err := url.Parse(spec.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &FieldError{Field: "url", Msg: fmt.Sprintf("%q: want an http:// or https:// URL", spec.URL)}
			}
		}
		if _, err := xdrConfig(spec); err != nil {
			return err
		}
		if _, err := rekeyTopicSpec(spec); err != nil {
			return err
		}
	default:
		if spec.File != nil {
			return &FieldError{Field: "file", Msg: "only file and xdr feeds write files"}
		}
	}
	if spec.XDR != nil && spec.Type != TypeXDR {
		return &FieldError{Field: "xdr", Msg: "only for xdr feeds"}
	}
	return nil
}

func validateFile(fs *FileSpec, records bool) error {
	if fs.Dir == "" {
		return &FieldError{Field: "file.dir", Msg: "required"}
	}
	switch fs.Format {
	case "", filesink.FormatPCAP, filesink.FormatJSONL:
	default:
		return &FieldError{Field: "file.format", Msg: fmt.Sprintf("%q: want pcap or jsonl", fs.Format)}
	}
	if records && fs.Format == filesink.FormatPCAP {
		return &FieldError{Field: "file.format", Msg: "transaction records are written as jsonl"}
	}
	if fs.RotateBytes < 0 {
		return &FieldError{Field: "file.rotate_bytes", Msg: "must not be negative"}
	}
	if fs.RotateSeconds < 0 {
		return &FieldError{Field: "file.rotate_seconds", Msg: "must not be negative"}
	}
	if fs.Keep < 0 {
		return &FieldError{Field: "file.keep", Msg: "must not be negative"}
	}
	return nil
}

// isCallsFeed reports whether spec reads the call records' topic.
func (m *Manager) isCallsFeed(spec *FeedSpec) bool {
	return m.cfg.CallsTopic != "" && slices.Contains(spec.Sources, m.cfg.CallsTopic)
}

// validateCallsFeed checks what a feed of call records may be: the records
// are JSON, relayed as they are, so http2, kafka and JSON-lines files carry
// them; packets, transactions and trigger points are copies' notions.
func (m *Manager) validateCallsFeed(spec *FeedSpec) error {
	if len(spec.Sources) != 1 {
		return &FieldError{Field: "sources", Msg: fmt.Sprintf("%q carries call records, not NF copies: a feed of it has no other source", m.cfg.CallsTopic)}
	}
	switch spec.Type {
	case TypeHTTP2, TypeKafka:
	case TypeFile:
		if spec.File != nil && spec.File.Format != "" && spec.File.Format != filesink.FormatJSONL {
			return &FieldError{Field: "file.format", Msg: fmt.Sprintf("%q: call records are written as jsonl", spec.File.Format)}
		}
	default:
		return &FieldError{Field: "type", Msg: fmt.Sprintf("%q: a feed of call records is http2, kafka or file (jsonl)", spec.Type)}
	}
	if len(spec.Directions) > 0 {
		return &FieldError{Field: "directions", Msg: "call records have no trigger points; filter on their fields instead"}
	}
	if spec.Sequencing != "" {
		return &FieldError{Field: "sequencing", Msg: "call records are not transactions of copies"}
	}
	return nil
}

// checkFileDir refuses a file feed whose directory this node cannot write:
// it is made if missing, and a file is created in it and removed. A feed
// that could never write its first file is an error at its creation, not a
// feed that looks healthy until its first copy (Prepare).
func checkFileDir(spec *FeedSpec) error {
	if spec.File == nil || spec.File.Dir == "" {
		return nil
	}
	dir := spec.File.Dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return &FieldError{Field: "file.dir", Msg: fmt.Sprintf("cannot create the directory: %v", err)}
	}
	f, err := os.CreateTemp(dir, ".signalbox-check-*")
	if err != nil {
		return &FieldError{Field: "file.dir", Msg: fmt.Sprintf("cannot write in the directory: %v", err)}
	}
	f.Close()
	return os.Remove(f.Name())
}
