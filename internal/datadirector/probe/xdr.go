package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// xdrRecord is the part of a transaction record (an xdr feed's output) the
// probe checks.
type xdrRecord struct {
	CorrelationID string `json:"correlation_id"`
	Result        string `json:"result"`
	Start         int64  `json:"start"`
	End           int64  `json:"end"`
	Hops          []struct {
		NFType    string `json:"nf_type"`
		Direction string `json:"direction"`
	} `json:"hops"`
}

var xdrResults = map[string]bool{"complete": true, "partial": true, "response_timeout": true, "orphan_response": true}

// looksLikeRecord tells an xDR record from a message copy: records start
// with their correlation_id, copies with "version"/"metadata-list".
func looksLikeRecord(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return bytes.HasPrefix(b, []byte(`{"correlation_id"`))
}

// checkRecord validates one xDR record; an empty reason means valid.
func checkRecord(b []byte) (xdrRecord, string, string) {
	var r xdrRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, "xdr_syntax", err.Error()
	}
	switch {
	case r.CorrelationID == "":
		return r, "xdr_missing_field", "record without correlation_id"
	case !xdrResults[r.Result]:
		return r, "xdr_bad_result", fmt.Sprintf("record %s: result %q", r.CorrelationID, r.Result)
	case len(r.Hops) == 0:
		return r, "xdr_missing_field", fmt.Sprintf("record %s: no hops", r.CorrelationID)
	case r.End < r.Start || r.Start <= 0:
		return r, "xdr_bad_time", fmt.Sprintf("record %s: start %d end %d", r.CorrelationID, r.Start, r.End)
	}
	for _, h := range r.Hops {
		if h.NFType == "" || h.Direction == "" {
			return r, "xdr_missing_field", fmt.Sprintf("record %s: hop without nf_type or direction", r.CorrelationID)
		}
	}
	return r, "", ""
}

// recordSeen counts a valid record: one per transaction (a repeat of a
// correlation id is a duplicate), by result, with latency from the
// transaction's last copy to its record's arrival.
func (s *stats) recordSeen(r *xdrRecord, size int, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received++
	s.winRecv++
	s.bytes += int64(size)
	if s.records == nil {
		s.records = map[string]bool{}
		s.results = map[string]int64{}
	}
	if s.records[r.CorrelationID] {
		s.dups++
		return
	}
	s.records[r.CorrelationID] = true
	s.unique++
	s.results[r.Result]++
	if lat := (now.UnixNano() - r.End) / 1000; lat >= 0 {
		s.latency(lat)
	}
	s.checkDone()
}
