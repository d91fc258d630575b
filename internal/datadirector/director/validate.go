package director

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"

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
	if err := m.validateOutput(spec); err != nil {
		return err
	}
	_, err := spec.TLS.Config("tls")
	return err
}

// validateOutput checks the filter and what the feed writes to: its sink's
// part of the spec (sinkKinds), and an xdr feed's correlation and its one
// record output.
func (m *Manager) validateOutput(spec *FeedSpec) error {
	if _, _, _, err := compileFilter(spec, m.isCallsFeed(spec)); err != nil {
		return err
	}
	if spec.File != nil && spec.Type != TypeFile && spec.Type != TypeXDR {
		return &FieldError{Field: "file", Msg: "only file and xdr feeds write files"}
	}
	if spec.XDR != nil && spec.Type != TypeXDR {
		return &FieldError{Field: "xdr", Msg: "only for xdr feeds"}
	}
	k, ok := sinkKindOf(spec)
	if !ok { // the type is known: an xdr feed without exactly one output
		return &FieldError{Field: "topic", Msg: "an xdr feed needs exactly one output: topic, url or file"}
	}
	if err := k.validate(m, spec, spec.Type == TypeXDR); err != nil {
		return err
	}
	if spec.Type != TypeXDR {
		return nil
	}
	if _, err := xdrConfig(spec); err != nil {
		return err
	}
	_, err := rekeyTopicSpec(spec)
	return err
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
