package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdrstore"
)

// RecordSearcher searches the stored transaction records (xdrstore).
type RecordSearcher interface {
	Search(ctx context.Context, q xdrstore.Query) ([]json.RawMessage, error)
}

var xdrParams = []string{"supi", "gpsi", "correlation_id", "nf_type", "service", "status", "cause", "result", "since", "until", "limit"}

// searchXDRs answers GET /api/v1/xdrs with the stored transaction records
// that match, newest first. They hold subscriber identities: admin and
// tracer roles only.
func (s *server) searchXDRs(w http.ResponseWriter, r *http.Request) {
	q, ok := s.xdrQuery(w, r, xdrParams)
	if !ok {
		return
	}
	recs, err := s.cfg.Records.Search(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}

// xdrQuery checks the caller and reads a search of the stored records from
// the query string, taking only the parameters in params; false: answered.
func (s *server) xdrQuery(w http.ResponseWriter, r *http.Request, params []string) (xdrstore.Query, bool) {
	var q xdrstore.Query
	if s.cfg.Records == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "this node keeps no transaction records (the director is off)"})
		return q, false
	}
	if role := roleFrom(r.Context()); role != RoleAdmin && role != RoleTracer {
		writeError(w, http.StatusForbidden, "transaction records carry subscriber identities: admin and tracer roles only", "")
		return q, false
	}
	v := r.URL.Query()
	for k := range v {
		if !slices.Contains(params, k) {
			s.fail(w, r, badRequest(k, "%s: unknown parameter; use %s", k, strings.Join(params, ", ")))
			return q, false
		}
	}
	q = xdrstore.Query{SUPI: v.Get("supi"), GPSI: v.Get("gpsi"), CorrelationID: v.Get("correlation_id"),
		NFType: v.Get("nf_type"), Service: v.Get("service"), Cause: v.Get("cause"), Result: v.Get("result"), Limit: 100}
	if q.SUPI != "" && !strings.HasPrefix(q.SUPI, "imsi-") {
		q.SUPI = "imsi-" + q.SUPI
	}
	if q.GPSI != "" && !strings.HasPrefix(q.GPSI, "msisdn-") {
		q.GPSI = "msisdn-" + strings.TrimPrefix(q.GPSI, "+")
	}
	// Records keep a masked GPSI (-mask-numbers): search by its masked
	// form, which finds the records of every GPSI ending alike.
	q.GPSI = nfcopy.MaskDigits(q.GPSI, s.cfg.MaskNumbers)
	if raw := v.Get("status"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 100 || n > 599 {
			s.fail(w, r, badRequest("status", "status: %q is not an HTTP status", raw))
			return q, false
		}
		q.Status = n
	}
	var err error
	if q.Since, err = parseTimeParam("since", v.Get("since"), s.now()); err != nil {
		s.fail(w, r, err)
		return q, false
	}
	if q.Until, err = parseTimeParam("until", v.Get("until"), s.now()); err != nil {
		s.fail(w, r, err)
		return q, false
	}
	if raw := v.Get("limit"); raw != "" {
		if q.Limit, err = wholeParam("limit", raw, 1, 1000); err != nil {
			s.fail(w, r, err)
			return q, false
		}
	}
	return q, true
}
