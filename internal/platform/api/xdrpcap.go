package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// MaxPcapTransactions is the most transactions one pcap of a search holds:
// a search that matches more is refused, naming the count, rather than cut.
const MaxPcapTransactions = 500

// pcapSlack widens the time range read back around the transactions' copies:
// the broker stamps a copy when it is produced, a little after the NF's own
// timestamp that the records keep.
const pcapSlack = 2 * time.Second

// xdrPcapParams are the search's parameters but limit: the pcap holds every
// match, up to MaxPcapTransactions.
var xdrPcapParams = slices.DeleteFunc(slices.Clone(xdrParams), func(p string) bool { return p == "limit" })

// xdrPcap answers GET /api/v1/xdrs/pcap with the copies of the transactions
// that the same search of /api/v1/xdrs matches, read back from the broker's
// retention, as one pcap in the synthetic feed's encoding with each
// transaction on a TCP flow of its own. Admin and tracer roles, as the
// search; each download is audited.
func (s *server) xdrPcap(w http.ResponseWriter, r *http.Request) {
	q, ok := s.xdrQuery(w, r, xdrPcapParams)
	if !ok {
		return
	}
	if s.cfg.Exporter == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "the director is not running"})
		return
	}
	q.Limit = MaxPcapTransactions + 1
	raw, err := s.cfg.Records.Search(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(raw) > MaxPcapTransactions {
		s.fail(w, r, &apiError{Status: http.StatusBadRequest, Field: "since", Msg: fmt.Sprintf(
			"the search matches more than %d transactions, the most one pcap holds: narrow it (since and until, a service, a cause, a subscriber)",
			MaxPcapTransactions)})
		return
	}
	if len(raw) == 0 {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Msg: "no stored transaction record matches the search"})
		return
	}
	eq := director.ExportQuery{Format: "pcap", Transactions: make(map[string]int, len(raw))}
	var first, last int64
	for i := range raw {
		var rec struct {
			CorrelationID string `json:"correlation_id"`
			Start         int64  `json:"start"`
			End           int64  `json:"end"`
		}
		if err := json.Unmarshal(raw[len(raw)-1-i], &rec); err != nil || rec.CorrelationID == "" {
			s.fail(w, r, fmt.Errorf("xdr pcap: a stored record without a correlation id: %v", err))
			return
		}
		if _, dup := eq.Transactions[rec.CorrelationID]; !dup {
			eq.Transactions[rec.CorrelationID] = len(eq.Transactions) // oldest first
		}
		if first == 0 || rec.Start < first {
			first = rec.Start
		}
		last = max(last, rec.End)
	}
	eq.Since = time.Unix(0, first).Add(-pcapSlack)
	if eq.Until = time.Unix(0, last).Add(pcapSlack); eq.Until.After(s.now()) {
		eq.Until = time.Time{} // now
	}
	s.logChange(r, "xdrs", "download pcap of a search", "", "query", r.URL.RawQuery, "transactions", len(eq.Transactions))
	stamp := time.Now().UTC().Format("20060102T150405Z")
	out := &exportOut{w: w, ctype: "application/vnd.tcpdump.pcap", filename: "signalbox-xdrs-" + stamp + ".pcap"}
	st, err := s.cfg.Exporter.Export(r.Context(), eq, out)
	if err != nil {
		s.exportFailed(w, r, out, err, st, fmt.Sprintf("the copies of the oldest matching transaction (%s) are no longer in the broker's retention (%s): search a more recent range",
			time.Unix(0, first).UTC().Format(time.RFC3339), err))
		return
	}
	s.log.Info("xdr pcap", "transactions", len(eq.Transactions), "read", st.Read, "copies", st.Matched)
}
