package api

import (
	"net/http"
	"strconv"

	"github.com/signalbox/signalbox/internal/platform/store"
)

// searchAudit answers the audit log, newest first: ?actor= (a token name),
// ?resource= (policies, rules, lists, directories, feeds, webhooks, tokens,
// traces, xdrs, captures, kafka_credentials), ?since= / ?until= (RFC 3339 or a
// duration back from now, as the call log takes), ?limit=. Admin only: it
// names the tokens.
func (s *server) searchAudit(w http.ResponseWriter, r *http.Request) {
	if roleFrom(r.Context()) != RoleAdmin {
		writeError(w, http.StatusForbidden, "the audit log is visible to the admin role only", "")
		return
	}
	q := r.URL.Query()
	aq := store.AuditQuery{Actor: q.Get("actor"), Resource: q.Get("resource")}
	var err error
	now := s.now()
	if aq.Since, err = parseTimeParam("since", q.Get("since"), now); err != nil {
		s.fail(w, r, err)
		return
	}
	if aq.Until, err = parseTimeParam("until", q.Get("until"), now); err != nil {
		s.fail(w, r, err)
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxCallQueryLimit {
			s.fail(w, r, badRequest("limit", "limit: %q is not a number from 1 to %d", v, store.MaxCallQueryLimit))
			return
		}
		aq.Limit = n
	}
	recs, err := s.store.SearchAudit(r.Context(), aq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}
