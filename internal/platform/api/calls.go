package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// Call log search limits (the store's contract).
const (
	defaultCallLimit = 100
	maxCallLimit     = 10000
)

var callDecisions = []string{"permit", "deny", "divert", "indeterminate"}

// searchCalls answers GET /api/v1/calls?number=&decision=&policy=&since=&until=&limit=
// with {"calls":[...]}, newest first.
func (s *server) searchCalls(w http.ResponseWriter, r *http.Request) {
	q, err := parseCallQuery(r.URL.Query(), s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	calls, err := s.calls.Search(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if calls == nil {
		calls = []store.CallRecord{}
	}
	if keep := s.cfg.MaskNumbers; keep > 0 && !slices.Contains(s.cfg.MaskReveal, roleFrom(r.Context())) {
		for i := range calls {
			c := &calls[i]
			c.Calling, c.Called = callrecord.MaskNumber(c.Calling, keep), callrecord.MaskNumber(c.Called, keep)
			c.TransformedCalling = callrecord.MaskNumber(c.TransformedCalling, keep)
			c.TransformedCalled = callrecord.MaskNumber(c.TransformedCalled, keep)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": calls})
}

func parseCallQuery(v map[string][]string, now time.Time) (store.CallQuery, error) {
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return strings.TrimSpace(vs[0])
		}
		return ""
	}
	for k := range v {
		switch k {
		case "number", "decision", "policy", "since", "until", "limit":
		case "":
			return store.CallQuery{}, badRequest("query", "query: a parameter without a name; use number, decision, policy, since, until, limit")
		default:
			return store.CallQuery{}, badRequest(k, "%s: unknown parameter; use number, decision, policy, since, until, limit", k)
		}
	}
	q := store.CallQuery{
		Number:   get("number"),
		Decision: get("decision"),
		Policy:   get("policy"),
		Limit:    defaultCallLimit,
	}
	if q.Decision != "" && !slices.Contains(callDecisions, q.Decision) {
		return q, badRequest("decision", "decision: %q is not one of %s", q.Decision, strings.Join(callDecisions, ", "))
	}
	var err error
	if q.Since, err = parseTimeParam("since", get("since"), now); err != nil {
		return q, err
	}
	if q.Until, err = parseTimeParam("until", get("until"), now); err != nil {
		return q, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return q, badRequest("until", "until: %s is before since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if raw := get("limit"); raw != "" {
		if q.Limit, err = wholeParam("limit", raw, 1, maxCallLimit); err != nil {
			return q, err
		}
	}
	return q, nil
}

// wholeParam parses a query parameter that is a whole number from lo to hi.
func wholeParam(name, raw string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name, "%s: %q is not a whole number from %d to %d", name, raw, lo, hi)
	}
	return n, nil
}

// parseTimeParam takes RFC 3339 or a duration relative to now ("-1h",
// "-30m"; a duration without sign means that long ago too).
func parseTimeParam(name, raw string, now time.Time) (time.Time, error) {
	if raw == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(raw); err == nil {
		if d > 0 {
			d = -d
		}
		return now.Add(d), nil
	}
	return time.Time{}, badRequest(name, "%s: %q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a relative duration (-1h, -30m)", name, raw)
}

// CallStreamReader reads the newest call records of the CALLS topic.
type CallStreamReader interface {
	Recent(ctx context.Context, n int) ([]json.RawMessage, error)
}

// callStream answers GET /api/v1/calls/stream?limit= with the newest call
// records on the CALLS topic, from every node, newest first: the
// console's live view of the stream.
func (s *server) callStream(w http.ResponseWriter, r *http.Request) {
	if s.cfg.CallStream == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "call records are not streamed on this node (-calls-topic, and a Kafka: the director's or -kafka-brokers)"})
		return
	}
	n := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = wholeParam("limit", v, 1, 1000); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	recs, err := s.cfg.CallStream.Recent(r.Context(), n)
	if err != nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}
