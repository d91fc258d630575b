package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// RecordSource is implemented by feed runtimes that keep the transaction
// records an xdr feed delivered last (the director's Manager, via the app).
type RecordSource interface {
	RecentRecords(name string, n int) ([]json.RawMessage, bool)
}

// feedRecords answers GET /api/v1/feeds/{name}/records?limit=N: the xdr
// feed's latest delivered transaction records, newest first.
func (s *server) feedRecords(w http.ResponseWriter, r *http.Request) {
	rt, name, ok := s.pathFeed(w, r)
	if !ok {
		return
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.fail(w, r, &apiError{Status: http.StatusBadRequest, Msg: "limit must be a whole number from 1 to 100", Field: "limit"})
			return
		}
		limit = n
	}
	src, ok := rt.(RecordSource)
	if !ok {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "this node keeps no transaction records"})
		return
	}
	recs, ok := src.RecentRecords(name, limit)
	if !ok {
		s.fail(w, r, &apiError{Status: http.StatusBadRequest, Msg: "feed " + strconv.Quote(name) + " is not a running xdr feed", Field: "name"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "records": recs})
}
