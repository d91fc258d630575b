package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// Capturer streams live copies as a pcap (the director's Manager).
type Capturer interface {
	Capture(ctx context.Context, q director.CaptureQuery, w io.Writer, deadline func(time.Time), flush func()) (director.CaptureStats, error)
}

// MaxCaptureDuration bounds a capture's duration parameter.
const MaxCaptureDuration = 24 * time.Hour

// Trailers a capture's answer ends with, when the server ends it (its
// duration passed): how many copies it wrote and dropped.
const (
	TrailerCaptureCopies  = "Signalbox-Capture-Copies"
	TrailerCaptureDropped = "Signalbox-Capture-Dropped"
)

// capture answers GET /api/v1/capture?sources=&filter=&supi=&gpsi=
// &directions=&duration= with a pcap stream of the copies that arrive from
// now on, until the client goes away (or duration passes). Admin and
// tracer roles; at most Config.CaptureMax at once (429 beyond); audited as
// it ends, with what it selected, how long it ran and what it wrote and
// dropped.
func (s *server) capture(w http.ResponseWriter, r *http.Request) {
	if role := roleFrom(r.Context()); role != RoleAdmin && role != RoleTracer {
		writeError(w, http.StatusForbidden, "a live capture needs the admin or tracer role", "")
		return
	}
	if s.cfg.Capturer == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "the director is not running"})
		return
	}
	if cap(s.captures) == 0 {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "live captures are off on this node (-capture-max 0)"})
		return
	}
	qv := r.URL.Query()
	q := director.CaptureQuery{Filter: qv.Get("filter"), SUPI: qv.Get("supi"), GPSI: qv.Get("gpsi"),
		Sources: splitParam(qv.Get("sources")), Directions: splitParam(qv.Get("directions"))}
	if v := qv.Get("duration"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > MaxCaptureDuration {
			s.fail(w, r, badRequest("duration", "%q: want a Go duration from 1s to %s (30s, 5m)", v, MaxCaptureDuration))
			return
		}
		q.Duration = d
	}
	select {
	case s.captures <- struct{}{}:
		defer func() { <-s.captures }()
	default:
		w.Header().Set("Retry-After", "10")
		s.fail(w, r, &apiError{Status: http.StatusTooManyRequests, Msg: fmt.Sprintf(
			"%d live captures are running on this node, the most it streams at once (-capture-max %d): retry when one ends",
			cap(s.captures), cap(s.captures))})
		return
	}
	rc := http.NewResponseController(w)
	out := &captureOut{w: w}
	start := time.Now()
	st, err := s.cfg.Capturer.Capture(r.Context(), q, out,
		func(t time.Time) { _ = rc.SetWriteDeadline(t) }, func() { _ = rc.Flush() })
	if err != nil && !out.started {
		if errors.As(err, new(*director.FieldError)) {
			err = badRequestFrom(err)
		}
		s.fail(w, r, err)
		return
	}
	w.Header().Set(TrailerCaptureCopies, strconv.FormatInt(st.Copies, 10))
	w.Header().Set(TrailerCaptureDropped, strconv.FormatInt(st.Dropped, 10))
	s.logChange(r, "captures", "live capture", "", "query", r.URL.RawQuery, "seconds", int64(time.Since(start).Seconds()),
		"copies", st.Copies, "dropped", st.Dropped)
	if err != nil {
		s.log.Warn("capture: ended early", "err", err, "copies", st.Copies)
	}
}

// captureOut sets the stream's headers on the first write: until then an
// error is answered with a status and JSON.
type captureOut struct {
	w       http.ResponseWriter
	started bool
}

func (o *captureOut) Write(p []byte) (int, error) {
	if !o.started {
		o.started = true
		h := o.w.Header()
		h.Set("Content-Type", "application/vnd.tcpdump.pcap")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Trailer", TrailerCaptureCopies+", "+TrailerCaptureDropped)
		o.w.WriteHeader(http.StatusOK)
	}
	return o.w.Write(p)
}

// splitParam splits a comma-separated query parameter, dropping blanks.
func splitParam(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
