package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// Exporter reads copies back from Kafka retention (the director's Manager).
// Export writes nothing to w before the query and range are checked, so an
// error with no output yet is answered as JSON.
type Exporter interface {
	Export(ctx context.Context, q director.ExportQuery, w io.Writer) (director.ExportStats, error)
}

// exportOut sets the download headers on the first write: until then an
// error can still be answered with a status and JSON.
type exportOut struct {
	w        http.ResponseWriter
	started  bool
	ctype    string
	filename string
}

func (o *exportOut) Write(p []byte) (int, error) {
	if !o.started {
		o.started = true
		h := o.w.Header()
		h.Set("Content-Type", o.ctype)
		h.Set("Content-Disposition", `attachment; filename="`+o.filename+`"`)
		h.Set("Cache-Control", "no-store")
		o.w.WriteHeader(http.StatusOK)
	}
	return o.w.Write(p)
}

// parseExportTime takes Unix milliseconds, RFC 3339, or a duration back
// from now ("-10m"), as the other searches do (parseTimeParam).
func parseExportTime(field, v string, now time.Time) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := parseTimeParam(field, v, now)
	if err != nil {
		return t, badRequest(field, "%q: want RFC 3339 (2026-01-02T15:04:05Z), Unix milliseconds or a duration back from now (-10m)", v)
	}
	return t, nil
}

// export streams the copies of a time range, filtered, as a pcap or JSON
// lines download: GET /api/v1/export?filter=&since=&until=&format=&sources=.
// Copies carry subscriber data, so it is for the admin role only.
func (s *server) export(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Exporter == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "the director is not running"})
		return
	}
	if roleFrom(r.Context()) != RoleAdmin {
		writeError(w, http.StatusForbidden, "exporting copies needs the admin role", "")
		return
	}
	qv := r.URL.Query()
	var (
		q   director.ExportQuery
		err error
	)
	if q.Since, err = parseExportTime("since", qv.Get("since"), s.now()); err != nil {
		s.fail(w, r, err)
		return
	}
	if q.Until, err = parseExportTime("until", qv.Get("until"), s.now()); err != nil {
		s.fail(w, r, err)
		return
	}
	q.Filter, q.Format = qv.Get("filter"), qv.Get("format")
	q.Sources = splitParam(qv.Get("sources"))
	ext, ctype := "jsonl", "application/x-ndjson"
	if q.Format == "pcap" {
		ext, ctype = "pcap", "application/vnd.tcpdump.pcap"
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	out := &exportOut{w: w, ctype: ctype, filename: fmt.Sprintf("signalbox-export-%s.%s", stamp, ext)}
	st, err := s.cfg.Exporter.Export(r.Context(), q, out)
	if err != nil {
		s.exportFailed(w, r, out, err, st, err.Error())
		return
	}
	if !out.started { // an empty jsonl export
		_, _ = out.Write(nil)
	}
	s.log.Info("export", "format", ext, "read", st.Read, "matched", st.Matched, "invalid", st.Invalid)
}

// exportFailed answers an export that failed: once the download has begun
// its status is gone, and the short body is the signal (the log says why);
// a range past retention is a 410 saying gone; anything else as fail does.
func (s *server) exportFailed(w http.ResponseWriter, r *http.Request, out *exportOut, err error, st director.ExportStats, gone string) {
	var nre *director.NotRetainedError
	switch {
	case out.started:
		s.log.Warn("export: ended early", "path", r.URL.Path, "err", err, "matched", st.Matched)
	case errors.As(err, &nre):
		writeError(w, http.StatusGone, gone, "since")
	default:
		s.fail(w, r, err)
	}
}
