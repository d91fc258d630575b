package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/trace"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// Subscriber data: only the admin and tracer roles may see, start, stop
// or download traces, and each of those is written to the audit log.
func (s *server) traceAccess(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.TraceDir == "" {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "subscriber traces need the director on this node"})
		return false
	}
	if role := roleFrom(r.Context()); role != RoleAdmin && role != RoleTracer {
		writeError(w, http.StatusForbidden, "subscriber traces are for the admin and tracer roles", "")
		return false
	}
	return true
}

// traceView is a trace as answered: its state and what it has caught.
type traceView struct {
	trace.Trace
	State      string `json:"state"` // running | ended
	PCAPBytes  int64  `json:"pcap_bytes"`
	JSONLBytes int64  `json:"jsonl_bytes"`
}

func (s *server) viewTrace(t trace.Trace) traceView {
	st := "ended"
	if t.Running(s.now()) {
		st = "running"
	}
	dir := trace.Dir(s.cfg.TraceDir, t.ID)
	return traceView{Trace: t, State: st, PCAPBytes: trace.Size(dir, "pcap"), JSONLBytes: trace.Size(dir, "jsonl")}
}

func (s *server) loadTrace(r *http.Request, id string) (trace.Trace, error) {
	var t trace.Trace
	rec, err := s.store.GetTrace(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return t, notFound("trace %q not found", id)
	}
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(rec.Spec, &t); err != nil {
		return t, fmt.Errorf("trace %q: stored spec: %w", id, err)
	}
	return t, nil
}

// pathTrace is the trace the request's path names, for a caller allowed to
// trace; false when it answered otherwise.
func (s *server) pathTrace(w http.ResponseWriter, r *http.Request) (trace.Trace, bool) {
	if !s.traceAccess(w, r) {
		return trace.Trace{}, false
	}
	t, err := s.loadTrace(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return t, false
	}
	return t, true
}

// traceRecord is t as the store keeps it.
func traceRecord(t trace.Trace) *store.TraceRecord {
	b, _ := json.Marshal(t)
	return &store.TraceRecord{Name: t.ID, Spec: b}
}

// storedTraces reads every stored trace, in the store's (start) order.
func (s *server) storedTraces(r *http.Request) ([]trace.Trace, error) {
	recs, err := s.store.ListTraces(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]trace.Trace, 0, len(recs))
	for _, rec := range recs {
		var t trace.Trace
		if err := json.Unmarshal(rec.Spec, &t); err != nil {
			return nil, fmt.Errorf("trace %q: stored spec: %w", rec.Name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// traceChanged audits a trace's start or stop, naming whom it traces, and
// has the app apply the running traces.
func (s *server) traceChanged(r *http.Request, action string, t trace.Trace, attrs ...any) {
	s.logChange(r, ChangedTraces, action, t.ID, append([]any{"whom", t.Whom()}, attrs...)...)
	s.notify(ChangedTraces)
}

func (s *server) listTraces(w http.ResponseWriter, r *http.Request) {
	if !s.traceAccess(w, r) {
		return
	}
	ts, err := s.storedTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]traceView, 0, len(ts))
	for i := len(ts) - 1; i >= 0; i-- { // ids sort by start: newest first
		out = append(out, s.viewTrace(ts[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out})
}

func (s *server) getTrace(w http.ResponseWriter, r *http.Request) {
	t, ok := s.pathTrace(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.viewTrace(t))
}

func (s *server) createTrace(w http.ResponseWriter, r *http.Request) {
	if !s.traceAccess(w, r) {
		return
	}
	var in struct {
		SUPI            string `json:"supi"`
		GPSI            string `json:"gpsi"`
		PEI             string `json:"pei"`
		Filter          string `json:"filter"`
		Minutes         int    `json:"minutes"`
		LookbackMinutes int    `json:"lookback_minutes"`
		MaxBytes        int64  `json:"max_bytes"`
	}
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	t := trace.Trace{SUPI: strings.TrimSpace(in.SUPI), GPSI: strings.TrimSpace(in.GPSI), PEI: strings.TrimSpace(in.PEI),
		Filter: in.Filter, Minutes: in.Minutes, LookbackMinutes: in.LookbackMinutes, MaxBytes: in.MaxBytes,
		CreatedBy: identityFrom(r.Context()).name, Node: s.cfg.Node}
	if err := t.Prepare(s.cfg.TraceLimits, s.now()); err != nil {
		var fe *trace.FieldError
		if errors.As(err, &fe) {
			err = badRequest(fe.Field, "%s", err.Error())
		}
		s.fail(w, r, err)
		return
	}
	ts, err := s.storedTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	running := 0
	for _, o := range ts {
		if o.Running(s.now()) && o.On(s.cfg.Node) {
			running++
		}
	}
	if max := s.cfg.MaxTraces; max > 0 && running >= max {
		s.fail(w, r, &apiError{Status: http.StatusTooManyRequests, Msg: fmt.Sprintf("%d traces are running on this node, the most it allows (-trace-max); stop one first", running)})
		return
	}
	if err := s.store.CreateTrace(r.Context(), traceRecord(t)); err != nil {
		s.fail(w, r, err)
		return
	}
	s.traceChanged(r, "start trace", t, "minutes", t.Minutes, "lookback_minutes", t.LookbackMinutes)
	writeJSON(w, http.StatusCreated, s.viewTrace(t))
}

// stopTrace ends a running trace now; its files stay until its retention.
func (s *server) stopTrace(w http.ResponseWriter, r *http.Request) {
	t, ok := s.pathTrace(w, r)
	if !ok {
		return
	}
	if t.Running(s.now()) {
		t.Stopped, t.End = true, s.now().UTC()
		if err := s.store.UpdateTrace(r.Context(), traceRecord(t)); err != nil {
			s.fail(w, r, err)
			return
		}
		s.traceChanged(r, "stop trace", t)
	}
	writeJSON(w, http.StatusOK, s.viewTrace(t))
}

// traceFile streams what a trace has caught so far (or in all, once
// ended) as pcap or JSON lines.
func (s *server) traceFile(w http.ResponseWriter, r *http.Request) {
	t, ok := s.pathTrace(w, r)
	if !ok {
		return
	}
	if !t.On(s.cfg.Node) {
		s.fail(w, r, &apiError{Status: http.StatusConflict, Msg: fmt.Sprintf("trace %s captures on node %s, which alone has its files: download it from that node's API", t.ID, t.Node)})
		return
	}
	format, ctype := "pcap", "application/vnd.tcpdump.pcap"
	if strings.HasSuffix(r.URL.Path, "/jsonl") {
		format, ctype = "jsonl", "application/x-ndjson"
	}
	s.logChange(r, "traces", "download trace", t.ID, "whom", t.Whom(), "format", format)
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, t.ID, format))
	w.Header().Set("Cache-Control", "no-store")
	write := trace.WritePCAP
	if format == "jsonl" {
		write = trace.WriteJSONL
	}
	if err := write(w, trace.Dir(s.cfg.TraceDir, t.ID)); err != nil {
		s.log.Warn("trace download ended early", "trace", t.ID, "err", err)
	}
}
