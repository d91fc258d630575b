// Package callrecord is the call record: one CURRI decision as signalbox
// streams it into Kafka (the CALLS topic), and its JSON codec (escaping
// strings as the copy records' codec does). It knows nothing of Kafka or of
// the director that carries the records on.
package callrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Version is the record format's version, written in every record. It
// changes as the copy records' does: a minor for added fields, a major for
// a change readers must know of.
const Version = "1.0.0"

// Record is one call decision. Fields left empty are left out of the JSON,
// but for the six request attributes, the decision and the step, which are
// always there.
type Record struct {
	Version string    `json:"version"`
	Time    time.Time `json:"time"` // when CUCM's request arrived
	Node    string    `json:"node"` // the signalbox node that answered
	Policy  string    `json:"policy"`
	// The call as CUCM described it.
	Calling            string `json:"calling"`
	Called             string `json:"called"`
	TransformedCalling string `json:"transformed_calling"`
	TransformedCalled  string `json:"transformed_called"`
	TriggerPoint       string `json:"trigger_point"`
	DeviceName         string `json:"device_name"`
	// What was decided, by which step (allow_list, block_list, rate_limit,
	// rule, default; empty for indeterminate) and which rule or list entry.
	Decision string `json:"decision"` // permit | deny | divert | indeterminate
	Step     string `json:"step"`
	RuleID   int64  `json:"rule_id,omitempty"`
	EntryID  int64  `json:"entry_id,omitempty"`
	Form     string `json:"matched_form,omitempty"`
	// Sent is the action CUCM was told, in short ("continue", "reject
	// reason=blocked", "divert 8000 reason=chaperone"); Error why the answer
	// was Indeterminate.
	Sent          string `json:"sent,omitempty"`
	Error         string `json:"error,omitempty"`
	LatencyMicros int64  `json:"latency_us"` // request in to answer flushed
	Client        string `json:"client"`     // the CUCM node, host:port
}

// Decisions are the values of Record.Decision.
var Decisions = []string{"permit", "deny", "divert", "indeterminate"}

// AppendJSON appends r's JSON to dst. It writes the fields in a fixed order
// without reflection: the producer encodes every call.
func AppendJSON(dst []byte, r *Record) []byte {
	dst = append(dst, `{"version":`...)
	dst = nfcopy.AppendString(dst, orVersion(r.Version))
	dst = append(dst, `,"time":"`...)
	dst = r.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	dst = str(dst, "node", r.Node)
	dst = str(dst, "policy", r.Policy)
	dst = str(dst, "calling", r.Calling)
	dst = str(dst, "called", r.Called)
	dst = str(dst, "transformed_calling", r.TransformedCalling)
	dst = str(dst, "transformed_called", r.TransformedCalled)
	dst = str(dst, "trigger_point", r.TriggerPoint)
	dst = str(dst, "device_name", r.DeviceName)
	dst = str(dst, "decision", r.Decision)
	dst = str(dst, "step", r.Step)
	if r.RuleID != 0 {
		dst = append(dst, `,"rule_id":`...)
		dst = strconv.AppendInt(dst, r.RuleID, 10)
	}
	if r.EntryID != 0 {
		dst = append(dst, `,"entry_id":`...)
		dst = strconv.AppendInt(dst, r.EntryID, 10)
	}
	if r.Form != "" {
		dst = str(dst, "matched_form", r.Form)
	}
	if r.Sent != "" {
		dst = str(dst, "sent", r.Sent)
	}
	if r.Error != "" {
		dst = str(dst, "error", r.Error)
	}
	dst = append(dst, `,"latency_us":`...)
	dst = strconv.AppendInt(dst, r.LatencyMicros, 10)
	dst = str(dst, "client", r.Client)
	return append(dst, '}')
}

func orVersion(v string) string {
	if v == "" {
		return Version
	}
	return v
}

// str appends ,"name":"value", the value escaped as copies' strings are.
func str(dst []byte, name, v string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return nfcopy.AppendString(dst, v)
}

// Decode reads a record. It refuses what is not a call record, naming what
// is missing, so that the director sets it aside.
func Decode(b []byte, r *Record) error {
	*r = Record{}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("call record: %w", err)
	}
	switch {
	case r.Version == "":
		return errors.New("call record: no version")
	case r.Version[0] != '1':
		return fmt.Errorf("call record: version %q: this node reads 1.x", r.Version)
	case r.Time.IsZero():
		return errors.New("call record: no time")
	case r.Decision == "":
		return errors.New("call record: no decision")
	}
	return nil
}
