package curri

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// Decider turns a call into a decision for a named policy. ok=false means the
// policy does not exist; Has says whether it does, for keepalives. Both run
// on the request path and must not block.
type Decider interface {
	Evaluate(policy string, call *callpolicy.Call, now time.Time) (d callpolicy.Decision, ok bool)
	Has(policy string) bool
}

// Event describes one answered CURRI request.
type Event struct {
	Policy        string
	Call          callpolicy.Call
	Decision      callpolicy.Decision
	Indeterminate bool   // the reply was Indeterminate (Err says why)
	Err           string // empty unless Indeterminate
	Start         time.Time
	Latency       time.Duration // from handler entry to the response flushed
	Client        string        // remote address, host:port
}

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	Decider Decider // required
	// OnDecision, if set, is called after the response has been written and
	// flushed, so slow logging never delays CUCM. The Event is reused for
	// later requests once OnDecision returns: copy what you keep.
	OnDecision func(*Event)
	// OnHead, if set, is called for each HEAD keepalive (policy "default"
	// for /curri), e.g. to show when CUCM was last seen per policy. known is
	// false for a policy the Decider does not have: that keepalive was
	// answered 404, so CUCM marks this server down for the profile.
	OnHead func(policy string, known bool)
	// Aliases maps request paths to policies, for CUCM profiles written
	// for other CURRI servers (e.g. "/pdp/AuthorizationEndPoint" →
	// "default"). Paths match ignoring ASCII case and a trailing slash.
	Aliases    map[string]string
	Registerer prometheus.Registerer // default: a private registry
	Logger     *slog.Logger          // default: slog.Default()
	MaxBody    int64                 // request body limit in bytes; default 64 KiB
}

// Handler serves CURRI: POST /curri (policy "default") and POST
// /curri/{policy}; HEAD on the same paths is CUCM's keepalive.
type Handler struct {
	decider    Decider
	onDecision func(*Event)
	onHead     func(string, bool)
	aliases    map[string]string // normalised path → policy
	log        *slog.Logger
	maxBody    int64

	pool sync.Pool // *reqState

	requests *prometheus.CounterVec
	duration prometheus.Histogram
	errs     map[string]prometheus.Counter // fixed set of reasons, read-only
	httpErrs map[string]prometheus.Counter // Server's protocol errors, read-only
	refused  map[string]prometheus.Counter // clients refused by the Server's Access, read-only

	mu      sync.RWMutex
	known   map[string]*policyCounters // policies the Decider has recognised
	unknown *policyCounters

	anonymous prometheus.Counter

	logMu      sync.Mutex
	lastLogged map[string]time.Time // unknown policy name (POST or HEAD) -> last warning
	overflowAt time.Time

	attrMu       sync.RWMutex
	attrs        map[string]prometheus.Counter // unknown Cisco attribute id -> its counter
	attrCounters *prometheus.CounterVec
	// conns: connections open; handshakeWaits: TLS handshakes that waited
	// for a turn (Server.Handshakes).
	conns          prometheus.Gauge
	handshakeWaits prometheus.Counter

	// Header values, shared read-only by every response.
	hdrContentType, hdrKeepAlive, hdrConnection, hdrClose, hdrAllow []string
}

type policyCounters struct{ permit, deny, divert, indeterminate prometheus.Counter }

// reqState is the per-request scratch, pooled.
type reqState struct {
	body []byte
	out  []byte
	ev   Event

	unknown Unknown // unknown Cisco attributes of the request

	// outcome of decide, for finish
	counters  *policyCounters
	decodeErr error
	reason    string
	label     string
}

const (
	defaultMaxBody = 64 << 10
	// maxKnownPolicies caps the per-policy counter cache and maxLoggedNames
	// the unknown-policy log memory; both keep memory bounded whatever
	// paths clients send.
	maxKnownPolicies = 4096
	maxLoggedNames   = 256
	unknownLabel     = "_unknown"
	otherLabel       = "_other"
	reasonUnknown    = "unknown_policy"
	// maxAttrLabels bounds the attribute label of
	// signalbox_curri_unknown_attributes_total; later ids count as _other.
	maxAttrLabels = 32
	reasonRead    = "read_error"
	maxPolicyName = 128
)

// NewHandler builds a Handler and registers its metrics.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Decider == nil {
		return nil, errors.New("curri: HandlerConfig.Decider is required")
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("curri: MaxBody %d is negative", cfg.MaxBody)
	}
	aliases := make(map[string]string, len(cfg.Aliases))
	for path, policy := range cfg.Aliases {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return nil, fmt.Errorf("curri: alias %q: a path starts with / and has no query", path)
		}
		if err := callpolicy.ValidatePolicyID(policy); err != nil {
			return nil, fmt.Errorf("curri: alias %q: policy %w", path, err)
		}
		aliases[normalisePath(path)] = policy
	}
	h := &Handler{
		decider:        cfg.Decider,
		onDecision:     cfg.OnDecision,
		onHead:         cfg.OnHead,
		aliases:        aliases,
		attrs:          make(map[string]prometheus.Counter),
		log:            cfg.Logger,
		maxBody:        cfg.MaxBody,
		known:          make(map[string]*policyCounters),
		lastLogged:     make(map[string]time.Time),
		errs:           make(map[string]prometheus.Counter),
		httpErrs:       make(map[string]prometheus.Counter),
		refused:        make(map[string]prometheus.Counter),
		hdrContentType: []string{"text/xml; charset=utf-8"},
		hdrKeepAlive:   []string{"timeout=" + strconv.Itoa(int(IdleTimeout/time.Second))},
		hdrConnection:  []string{"Keep-Alive"},
		hdrClose:       []string{"close"},
		hdrAllow:       []string{"POST, HEAD"},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.maxBody == 0 {
		h.maxBody = defaultMaxBody
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_curri_requests_total",
		Help: "CURRI routing requests answered, by policy (unknown names as _unknown) and decision.",
	}, []string{"policy", "decision"})
	h.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "signalbox_curri_request_duration_seconds",
		Help:    "Time from reading a CURRI request body to the response flushed.",
		Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3},
	})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_curri_errors_total",
		Help: "CURRI requests answered Indeterminate, by reason.",
	}, []string{"reason"})
	httpErrs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_curri_http_errors_total",
		Help: "CURRI connections and requests refused at the HTTP layer, by reason (bad_request, header_too_large, " +
			"not_implemented, not_found, method_not_allowed, tls_handshake, timeout, incomplete_request).",
	}, []string{"reason"})
	for _, r := range httpErrReasons {
		h.httpErrs[r] = httpErrs.WithLabelValues(r)
	}
	h.anonymous = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "signalbox_curri_anonymous_calls_total",
		Help: "CURRI requests whose caller presented no number (callingnumber and transformedcgpn empty or absent).",
	})
	h.attrCounters = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_curri_unknown_attributes_total",
		Help: "urn:Cisco:uc:1.0: request attributes signalbox does not know, by id after the prefix " +
			"(the first 32 ids seen; later ones as _other).",
	}, []string{"attribute"})
	h.conns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "signalbox_curri_connections",
		Help: "CURRI connections open (TLS handshakes under way included); CUCM holds a few per node.",
	})
	h.handshakeWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "signalbox_curri_tls_handshakes_waited_total",
		Help: "TLS handshakes that waited for their turn: more clients were handshaking at once than the server computes together (a reconnect storm).",
	})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_curri_refused_total",
		Help: "CURRI clients refused, by reason: address (not in -curri-allow-from), connections (at -curri-max-conns-per-client), identity (a client certificate not in -curri-client-names).",
	}, []string{"reason"})
	for _, r := range refusalReasons {
		h.refused[r] = refused.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{h.requests, h.duration, errs, httpErrs, refused, h.anonymous, h.attrCounters, h.conns, h.handshakeWaits} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("curri: register metrics: %w", err)
		}
	}
	for _, r := range []string{ReasonDoctype, ReasonTooLarge, ReasonMalformed, ReasonNotXACML, ReasonMissingAttribute,
		ReasonBadEncoding, ReasonSlowBody, ReasonEmpty, reasonUnknown, reasonRead} {
		h.errs[r] = errs.WithLabelValues(r)
	}
	h.unknown = h.newCounters(unknownLabel)
	h.pool.New = func() any { return &reqState{body: make([]byte, 0, 4096), out: make([]byte, 0, 2048)} }
	return h, nil
}

func (h *Handler) newCounters(policy string) *policyCounters {
	return &policyCounters{
		permit:        h.requests.WithLabelValues(policy, callpolicy.Permit),
		deny:          h.requests.WithLabelValues(policy, callpolicy.Deny),
		divert:        h.requests.WithLabelValues(policy, callpolicy.Divert),
		indeterminate: h.requests.WithLabelValues(policy, "indeterminate"),
	}
}

// counters returns the counters of a policy the Decider recognised.
func (h *Handler) counters(policy string) *policyCounters {
	h.mu.RLock()
	c := h.known[policy]
	h.mu.RUnlock()
	if c != nil {
		return c
	}
	c = h.newCounters(policy)
	h.mu.Lock()
	if len(h.known) < maxKnownPolicies {
		h.known[strings.Clone(policy)] = c
	}
	h.mu.Unlock()
	return c
}

// countersIfKnown labels a request whose policy was never asked about (the
// body was bad): its name if the Decider has recognised it before, else
// _unknown, so paths cannot grow the label set.
func (h *Handler) countersIfKnown(policy string) *policyCounters {
	h.mu.RLock()
	c := h.known[policy]
	h.mu.RUnlock()
	if c == nil {
		return h.unknown
	}
	return c
}

// policyFor maps a request path to its policy: an alias, /curri (policy
// "default") or /curri/{policy}. It ignores ASCII case (policy ids are
// lowercase) and one trailing slash, as CUCM profiles written by hand and
// for other CURRI servers have them.
func (h *Handler) policyFor(p string) (string, bool) {
	p = strings.TrimSuffix(p, "/")
	if len(h.aliases) > 0 {
		if policy, ok := h.aliases[normalisePath(p)]; ok {
			return policy, true
		}
	}
	const prefix = "/curri"
	if len(p) < len(prefix) || !equalFoldASCII(p[:len(prefix)], prefix) {
		return "", false
	}
	rest := p[len(prefix):]
	if rest == "" {
		return callpolicy.DefaultPolicyID, true
	}
	if rest[0] != '/' || len(rest) == 1 || strings.IndexByte(rest[1:], '/') >= 0 {
		return "", false
	}
	id := rest[1:]
	for i := 0; i < len(id); i++ {
		if 'A' <= id[i] && id[i] <= 'Z' {
			return strings.ToLower(id), true
		}
	}
	return id, true
}

// normalisePath is an alias path as looked up: lowercase, no trailing slash.
func normalisePath(p string) string {
	return strings.ToLower(strings.TrimSuffix(p, "/"))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	policy, ok := h.policyFor(r.URL.Path)
	if !ok {
		h.countHTTP(httpErrNotFound)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodHead:
		// CUCM's keepalive: answer at once, no body.
		if !h.keepalive(policy, r.RemoteAddr, start) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		hd := w.Header()
		hd["Keep-Alive"] = h.hdrKeepAlive
		w.WriteHeader(http.StatusOK)
		return
	default:
		h.countHTTP(httpErrMethod)
		w.Header()["Allow"] = h.hdrAllow
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}

	st := h.begin(policy, r.RemoteAddr, start)
	body, reason, err := h.readBody(r, st)
	closeConn := h.decide(st, body, reason, err)

	hd := w.Header()
	hd["Content-Type"] = h.hdrContentType
	hd["Content-Length"] = []string{strconv.Itoa(len(st.out))}
	hd["Keep-Alive"] = h.hdrKeepAlive
	if closeConn {
		hd["Connection"] = h.hdrClose // the rest of the body was not read
	} else {
		hd["Connection"] = h.hdrConnection
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(st.out)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	h.finish(st)
}

// keepalive handles a HEAD for policy and reports whether the policy exists.
// A keepalive for a policy that does not exist is answered 404, counted and
// logged: answered 200, CUCM would show the route server active while every
// call got Indeterminate; a 4xx makes it mark the server down and use the
// profile's secondary.
func (h *Handler) keepalive(policy, client string, now time.Time) bool {
	known := h.decider.Has(policy)
	if !known {
		h.countHTTP(httpErrUnknownPolicy)
		h.logUnknown(policy, client, now, true)
	}
	if h.onHead != nil {
		h.onHead(policy, known)
	}
	return known
}

// countHTTP counts a refusal at the HTTP layer.
func (h *Handler) countHTTP(reason string) {
	if c := h.httpErrs[reason]; c != nil {
		c.Inc()
	}
}

// begin takes a request's scratch state from the pool.
func (h *Handler) begin(policy, client string, start time.Time) *reqState {
	st := h.pool.Get().(*reqState)
	st.ev = Event{Policy: policy, Start: start, Client: client}
	return st
}

// decide answers one POST: body is the request body, or reason/err say why
// it could not be read. The reply body goes to st.out; the outcome is kept
// in st for finish. It reports whether the connection must close after the
// reply (the rest of the body was not read).
func (h *Handler) decide(st *reqState, body []byte, reason string, err error) (closeConn bool) {
	ev := &st.ev
	if err == nil {
		err = DecodeRequest(body, &ev.Call, &st.unknown)
		if de, ok := err.(*DecodeError); ok {
			reason = de.Reason
		}
	}
	st.counters, st.decodeErr, st.label = nil, nil, ""
	switch {
	case err != nil:
		st.decodeErr = err
		st.counters = h.countersIfKnown(ev.Policy)
		st.out = AppendError(st.out[:0], err)
	default:
		dec, known := h.decider.Evaluate(ev.Policy, &ev.Call, ev.Start)
		if !known {
			reason = reasonUnknown
			st.decodeErr = errUnknownPolicy
			st.counters = h.unknown
			st.out = appendIndeterminate(st.out[:0], statusProcessingError, unknownPolicyText(ev.Policy))
			break
		}
		ev.Decision = dec
		st.counters = h.counters(ev.Policy)
		if !encodable(&dec.Action) {
			reason = "" // a policy engine bug, not a request error: counted as indeterminate only
			st.decodeErr = errUnencodable
		}
		st.out = AppendResponse(st.out[:0], &dec.Action)
		st.label = dec.Action.Decision
	}
	st.reason = reason
	return reason == ReasonTooLarge || reason == ReasonSlowBody || reason == reasonRead
}

// finish runs once the reply has been written: metrics, the unknown-policy
// warning, OnDecision. Then st goes back to the pool.
func (h *Handler) finish(st *reqState) {
	ev := &st.ev
	ev.Latency = time.Since(ev.Start)
	h.duration.Observe(ev.Latency.Seconds())
	if st.decodeErr != nil {
		ev.Indeterminate = true
		ev.Err = st.decodeErr.Error()
		st.counters.indeterminate.Inc()
		if c := h.errs[st.reason]; c != nil {
			c.Inc()
		}
	} else {
		if ev.Call.Anonymous() {
			h.anonymous.Inc()
		}
		switch st.label {
		case callpolicy.Permit:
			st.counters.permit.Inc()
		case callpolicy.Deny:
			st.counters.deny.Inc()
		case callpolicy.Divert:
			st.counters.divert.Inc()
		}
	}
	if st.reason == reasonUnknown {
		h.logUnknown(ev.Policy, ev.Client, ev.Start, false)
	}
	if st.unknown.N > 0 {
		h.countUnknownAttrs(&st.unknown, ev.Client)
		st.unknown = Unknown{}
	}
	if h.onDecision != nil {
		h.onDecision(ev)
	}
	*ev = Event{}
	st.counters, st.decodeErr = nil, nil
	if cap(st.body) <= 4*defaultMaxBody {
		h.pool.Put(st)
	}
}

var (
	errUnknownPolicy = errors.New("unknown policy")
	errUnencodable   = errors.New("decision cannot be expressed in CIXML (divert without destination or unknown decision)")
)

// encodable mirrors AppendResponse's Indeterminate fallbacks.
func encodable(a *callpolicy.Action) bool {
	switch a.Decision {
	case callpolicy.Permit, callpolicy.Deny:
		return true
	case callpolicy.Divert:
		return a.Destination != ""
	}
	return false
}

// readBody reads the request body into st.body, at most maxBody bytes. On
// failure it returns the error reason and a *DecodeError.
func (h *Handler) readBody(r *http.Request, st *reqState) ([]byte, string, error) {
	if r.ContentLength > h.maxBody {
		return nil, ReasonTooLarge, &DecodeError{Reason: ReasonTooLarge, Msg: "Content-Length " + strconv.FormatInt(r.ContentLength, 10) + " over the limit of " + strconv.FormatInt(h.maxBody, 10) + " bytes"}
	}
	buf := st.body[:0]
	if want := int(r.ContentLength) + 1; want > cap(buf) {
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > h.maxBody {
			st.body = buf[:0]
			return nil, ReasonTooLarge, &DecodeError{Reason: ReasonTooLarge, Msg: "body over the limit of " + strconv.FormatInt(h.maxBody, 10) + " bytes"}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			st.body = buf[:0]
			var ne net.Error
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
				return nil, ReasonSlowBody, &DecodeError{Reason: ReasonSlowBody, Msg: "body not received in time: " + err.Error()}
			}
			return nil, reasonRead, fmt.Errorf("read body: %w", err)
		}
	}
	st.body = buf
	return buf, "", nil
}

// countUnknownAttrs counts a request's unknown Cisco attributes, logging
// each id the first time it is seen.
func (h *Handler) countUnknownAttrs(u *Unknown, client string) {
	for _, id := range u.IDs[:u.N] {
		h.attrMu.RLock()
		c := h.attrs[string(id)]
		h.attrMu.RUnlock()
		if c == nil {
			c = h.newAttr(string(id), client)
		}
		c.Inc()
	}
}

func (h *Handler) newAttr(id, client string) prometheus.Counter {
	h.attrMu.Lock()
	defer h.attrMu.Unlock()
	if c := h.attrs[id]; c != nil {
		return c
	}
	label := id
	if len(h.attrs) >= maxAttrLabels {
		label = otherLabel
	}
	c := h.attrCounters.WithLabelValues(label)
	if len(h.attrs) < maxLoggedNames {
		h.attrs[id] = c
		h.log.Info("curri request carries an attribute signalbox does not know; counted, otherwise ignored",
			"attribute", ciscoAttrPrefix+id, "client", client)
	}
	return c
}

// logUnknown warns about an unknown policy at most once a minute per name,
// remembering at most maxLoggedNames names.
func (h *Handler) logUnknown(policy, client string, now time.Time, head bool) {
	if len(policy) > maxPolicyName {
		policy = policy[:maxPolicyName] + "…"
	}
	h.logMu.Lock()
	last, seen := h.lastLogged[policy]
	if seen && now.Sub(last) < time.Minute {
		h.logMu.Unlock()
		return
	}
	if !seen && len(h.lastLogged) >= maxLoggedNames {
		for name, t := range h.lastLogged {
			if now.Sub(t) >= time.Minute {
				delete(h.lastLogged, name)
			}
		}
	}
	if !seen && len(h.lastLogged) >= maxLoggedNames {
		// Too many distinct names this minute: one summary line instead.
		if now.Sub(h.overflowAt) < time.Minute {
			h.logMu.Unlock()
			return
		}
		h.overflowAt = now
		h.logMu.Unlock()
		h.log.Warn("curri requests for many unknown policies; further names suppressed for a minute",
			"policy", policy, "client", client)
		return
	}
	h.lastLogged[strings.Clone(policy)] = now
	h.logMu.Unlock()
	if head {
		h.log.Warn("curri keepalive for unknown policy answered 404: CUCM marks this server down for the profile",
			"policy", policy, "client", client)
		return
	}
	h.log.Warn("curri request for unknown policy answered Indeterminate", "policy", policy, "client", client)
}

// unknownPolicyText is what CUCM is told of a policy id it asked for that
// does not exist: the id named, as CUCM's trace shows it to the admin who
// typed the web-service URI (at most 64 bytes of it).
func unknownPolicyText(policy string) string {
	if len(policy) > 64 {
		policy = policy[:64] + "…"
	}
	return fmt.Sprintf("unknown policy %q (no such policy on this server: check the ECC profile's web-service URI, /curri/<policy>)", policy)
}
