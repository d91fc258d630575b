// Package api is signalbox's REST API under /api/v1: JSON resources for call
// policies, their rules and allow/block lists, the call log, director feeds
// and API tokens, behind bearer-token auth. Each resource has its own file;
// this one holds the configuration, the routes and the request metrics.
//
// Every write is validated by the owning domain package before it reaches the
// store, so bad input changes nothing; after a committed configuration change
// Config.OnChange tells the owner to rebuild its compiled snapshot (Config.Live
// to patch it, for rules, directories and lists).
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/datadirector/trace"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// Roles an API token can hold.
const (
	RoleAdmin  = "admin"  // may read and write everything
	RoleViewer = "viewer" // may only read (GET/HEAD), and not tokens
	// RoleTracer reads as a viewer does and may also start, stop and
	// download subscriber traces (which a viewer may not even list).
	RoleTracer = "tracer"
)

// What OnChange is told has changed (and the audit log's resources).
const (
	ChangedPolicies = "policies"
	ChangedFeeds    = "feeds"
	ChangedWebhooks = "webhooks"
	ChangedTraces   = "traces"
	changedTokens   = "tokens"
)

// The audit log's resources of changes that OnChange is told of as
// ChangedPolicies: each is searched under its own (GET /audit?resource=).
const (
	auditRules       = "rules"
	auditLists       = "lists"
	auditDirectories = "directories"
)

// Body size limits: bulk loads (100,000 rules, large CSV lists) get the big one.
const (
	maxBodyBytes     = 1 << 20
	maxBulkBodyBytes = 64 << 20
)

// PolicyEvaluator evaluates a call against the live compiled policies without
// side effects (no rate-limit counting, no hit counts, no call log).
type PolicyEvaluator interface {
	// DryRun reports false when no policy with that id is loaded.
	DryRun(policyID string, call *callpolicy.Call, now time.Time) (callpolicy.Decision, bool)
}

// FeedRuntime is the director's feed runtime as the API needs it.
type FeedRuntime interface {
	// Validate checks a spec completely (returning *director.FieldError)
	// without touching anything.
	Validate(spec *director.FeedSpec) error
	// Prepare positions a new feed's consumer group before the spec is
	// stored, so that the feed delivers every copy produced after the API
	// answered. It is called on create only: on a running feed it would
	// skip the undelivered backlog.
	Prepare(ctx context.Context, spec *director.FeedSpec) error
	// Status reports a running feed's state (any JSON-encodable value);
	// false when the feed is not running.
	Status(name string) (any, bool)
}

// SessionSource finds the sign-in session a request's cookie names
// (signin.Service); signin.ErrNoSession when there is none.
type SessionSource interface {
	Lookup(r *http.Request) (store.Session, error)
}

// CallSearcher searches the call log (the calllog package, which can flush
// its queue first); when Config.Calls is nil the store is searched directly.
type CallSearcher interface {
	Search(ctx context.Context, q store.CallQuery) ([]store.CallRecord, error)
}

// LivePolicy is the owner of the live compiled call policies
// (livepolicy.Manager), told of the changes it can apply without reading
// the configuration back.
type LivePolicy interface {
	// Replacing is called during a bulk replacement of a policy's rules,
	// with the rules as they will be stored (IDs set) while the store
	// writes them, so that the policy is compiled meanwhile; it must only
	// read rules. The function it returns is called once, when the store
	// has committed the rules (true) or failed (false).
	Replacing(policyID string, rules []callpolicy.Rule) (stored func(ok bool))
	// RuleIndex returns the live snapshot's source hashes of a policy's
	// rules (callpolicy.Snapshot.RuleIndex) and the configuration version
	// it was built from; false makes a bulk replacement a whole one.
	RuleIndex(policyID string) (index []callpolicy.HashID, version int64, ok bool)
	// ChangingRules is Replacing for an incremental replacement: the
	// rules removed and added (IDs set).
	ChangingRules(policyID string, removed []int64, added []callpolicy.Rule) (stored func(ok bool))
	// DirectoryChanged is told what was written of a directory's entries.
	DirectoryChanged(id string, ch store.DirectoryChange)
	// ListsChanged is told that the entries of a policy's lists (policy
	// set) or of a shared list (shared set) were added or deleted.
	ListsChanged(policy, shared string)
}

// Config is everything the API needs. Store is required; a nil Policies or
// Feeds makes the endpoints that need them answer 503.
type Config struct {
	Store    store.Store
	Policies PolicyEvaluator
	Feeds    FeedRuntime
	Calls    CallSearcher
	// KafkaCredentials issues kafka feeds' consumer credentials; nil:
	// those endpoints answer 503.
	KafkaCredentials KafkaCredentials
	// OnChange is called after every committed configuration change with
	// ChangedPolicies or ChangedFeeds, so the owner rebuilds its snapshot;
	// with Live set, not for the changes Live is told of.
	OnChange func(what string)
	// Live, if set, keeps the compiled call policies up to date in place
	// of OnChange for rules, directories and lists (livepolicy.Manager).
	Live LivePolicy
	// AdminToken, when set, is accepted as an admin bearer token.
	AdminToken string
	// Sessions finds the console's sign-in sessions (package signin); nil:
	// bearer tokens only.
	Sessions   SessionSource
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Version    string
	// Alarms and Gatherer feed /alarms and /stats (the console's overview);
	// when nil those endpoints answer 503.
	Alarms   AlarmSource
	Gatherer prometheus.Gatherer
	// Exporter serves GET /export (the director's Manager); nil answers 503.
	Exporter Exporter
	// Capturer serves GET /capture (the director's Manager), at most
	// CaptureMax at once; nil (or CaptureMax 0) answers 503.
	Capturer   Capturer
	CaptureMax int
	// Webhooks sends test events (POST /webhooks/{name}/test); nil
	// answers 503.
	Webhooks WebhookTester
	// CallStream reads the newest call records of the CALLS topic (GET
	// /calls/stream); nil (no stream on this node) answers 503.
	CallStream CallStreamReader
	// Records searches the stored transaction records (GET /xdrs); nil
	// answers 503.
	Records RecordSearcher
	// MaskNumbers hides all but the last this many digits of the call
	// log's numbers from the roles not in MaskReveal; 0: off.
	MaskNumbers int
	MaskReveal  []string
	// TraceDir holds the subscriber traces' files; empty: no traces on
	// this node (503). TraceLimits bound them; MaxTraces running at once.
	TraceDir    string
	TraceLimits trace.Limits
	MaxTraces   int
	// Site answers the peer site (GET /site) and SiteName is this site's
	// name, with two-site redundancy; nil and "" without.
	Site     SiteReporter
	SiteName string
	// Node is this node's name: a trace captures on the node it was
	// started on, and only that node has its files.
	Node string
}

type server struct {
	cfg      Config
	store    store.Store
	calls    CallSearcher
	log      *slog.Logger
	mux      *http.ServeMux
	requests *prometheus.CounterVec
	// auditErrors counts changes whose audit record could not be written.
	auditErrors prometheus.Counter
	now         func() time.Time
	openapi     []byte // GET /api/v1/openapi.json
	// patterns are the routes served, "METHOD /path", as registered.
	patterns []string
	// captures holds a token per live capture running (GET /capture).
	captures chan struct{}
}

// New returns the API handler. It serves /api/v1/... only; mount it on the
// main mux at "/api/".
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: Config.Store is required")
	}
	s := &server{
		cfg:   cfg,
		store: cfg.Store,
		calls: cfg.Calls,
		log:   cfg.Logger,
		mux:   http.NewServeMux(),
		now:   time.Now,
		// One token per live capture that may run at once.
		captures: make(chan struct{}, max(cfg.CaptureMax, 0)),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.calls == nil {
		s.calls = storeSearcher{cfg.Store}
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_api_requests_total",
		Help: "REST API requests by route pattern and HTTP status code.",
	}, []string{"route", "code"})
	s.auditErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "signalbox_api_audit_write_errors_total",
		Help: "Changes made through the API whose audit-log record could not be written (the change stands).",
	})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.requests); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
		if err := cfg.Registerer.Register(s.auditErrors); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	var err error
	if s.openapi, err = OpenAPIJSON(); err != nil {
		return nil, err
	}
	s.routes()
	return http.HandlerFunc(s.serveHTTP), nil
}

// openapiPath is served without a token.
const openapiPath = "/api/v1/openapi.json"

func (s *server) routes() {
	h := func(pattern string, fn http.HandlerFunc) {
		s.patterns = append(s.patterns, pattern)
		s.mux.HandleFunc(pattern, fn)
	}
	h("GET "+openapiPath, s.getOpenAPI)
	h("GET /api/v1/version", s.getVersion)

	h("GET /api/v1/policies", s.listPolicies)
	h("POST /api/v1/policies", s.createPolicy)
	h("GET /api/v1/policies/{id}", s.getPolicy)
	h("PUT /api/v1/policies/{id}", s.updatePolicy)
	h("PATCH /api/v1/policies/{id}", s.patchPolicy)
	h("DELETE /api/v1/policies/{id}", s.deletePolicy)
	h("POST /api/v1/policies/{id}/evaluate", s.evaluate)

	h("GET /api/v1/policies/{id}/rules", s.listRules)
	h("POST /api/v1/policies/{id}/rules", s.createRule)
	h("PUT /api/v1/policies/{id}/rules", s.replaceRules)
	h("GET /api/v1/rules/{id}", s.getRule)
	h("PUT /api/v1/rules/{id}", s.updateRule)
	h("DELETE /api/v1/rules/{id}", s.deleteRule)

	h("GET /api/v1/policies/{id}/lists/{list}/entries", s.listEntries)
	h("POST /api/v1/policies/{id}/lists/{list}/entries", s.addEntries)
	h("DELETE /api/v1/policies/{id}/lists/{list}/entries/{entry}", s.deleteEntry)

	h("GET /api/v1/lists", s.listSharedLists)
	h("POST /api/v1/lists", s.createSharedList)
	h("GET /api/v1/lists/{id}", s.getSharedList)
	h("PUT /api/v1/lists/{id}", s.updateSharedList)
	h("DELETE /api/v1/lists/{id}", s.deleteSharedList)
	h("GET /api/v1/lists/{id}/entries", s.listSharedEntries)
	h("POST /api/v1/lists/{id}/entries", s.addSharedEntries)
	h("DELETE /api/v1/lists/{id}/entries/{entry}", s.deleteSharedEntry)

	h("GET /api/v1/directories", s.listDirectories)
	h("POST /api/v1/directories", s.createDirectory)
	h("GET /api/v1/directories/{id}", s.getDirectory)
	h("PUT /api/v1/directories/{id}", s.updateDirectory)
	h("DELETE /api/v1/directories/{id}", s.deleteDirectory)
	h("GET /api/v1/directories/{id}/entries", s.listDirectoryEntries)
	h("POST /api/v1/directories/{id}/entries", s.addDirectoryEntries)
	h("PUT /api/v1/directories/{id}/entries", s.replaceDirectoryEntries)
	h("DELETE /api/v1/directories/{id}/entries/{number}", s.deleteDirectoryEntry)

	h("GET /api/v1/calls", s.searchCalls)
	h("GET /api/v1/calls/stream", s.callStream)

	h("GET /api/v1/feeds", s.listFeeds)
	h("POST /api/v1/feeds", s.createFeed)
	h("GET /api/v1/feeds/{name}", s.getFeed)
	h("PUT /api/v1/feeds/{name}", s.updateFeed)
	h("DELETE /api/v1/feeds/{name}", s.deleteFeed)
	h("GET /api/v1/feeds/{name}/status", s.feedStatus)
	h("GET /api/v1/site", s.getSite)
	h("GET /api/v1/feeds/{name}/records", s.feedRecords)
	h("POST /api/v1/feeds/{name}/credential", s.issueCredential)
	h("DELETE /api/v1/feeds/{name}/credential", s.revokeCredential)
	h("GET /api/v1/export", s.export)
	h("GET /api/v1/capture", s.capture)

	h("GET /api/v1/webhooks", s.listWebhooks)
	h("POST /api/v1/webhooks", s.createWebhook)
	h("GET /api/v1/webhooks/{name}", s.getWebhook)
	h("PUT /api/v1/webhooks/{name}", s.updateWebhook)
	h("DELETE /api/v1/webhooks/{name}", s.deleteWebhook)
	h("POST /api/v1/webhooks/{name}/test", s.testWebhook)

	h("GET /api/v1/xdrs", s.searchXDRs)
	h("GET /api/v1/xdrs/pcap", s.xdrPcap)

	h("GET /api/v1/traces", s.listTraces)
	h("POST /api/v1/traces", s.createTrace)
	h("GET /api/v1/traces/{id}", s.getTrace)
	h("DELETE /api/v1/traces/{id}", s.stopTrace)
	h("GET /api/v1/traces/{id}/pcap", s.traceFile)
	h("GET /api/v1/traces/{id}/jsonl", s.traceFile)

	h("GET /api/v1/alarms", s.getAlarms)
	h("GET /api/v1/stats", s.getStats)

	h("GET /api/v1/audit", s.searchAudit)

	h("GET /api/v1/tokens", s.listTokens)
	h("POST /api/v1/tokens", s.createToken)
	h("DELETE /api/v1/tokens/{id}", s.deleteToken)
}

// serveHTTP counts the request under its route pattern (bounded: the
// patterns above plus "unmatched"), authenticates, then routes.
func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	_, route := s.mux.Handler(r)
	if route == "" {
		route = "unmatched"
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.requests.WithLabelValues(route, strconv.Itoa(sw.code())).Inc()
	}()
	if r.URL.Path == openapiPath && r.Method == http.MethodGet {
		s.mux.ServeHTTP(sw, r)
		return
	}
	who, ok := s.authenticate(sw, r)
	if !ok {
		return
	}
	s.mux.ServeHTTP(sw, r.WithContext(withIdentity(r.Context(), who)))
}

// statusWriter remembers the status code for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// listsChanged logs a committed change of list entries and tells the
// owner of the configuration which lists changed.
func (s *server) listsChanged(r *http.Request, action, id, policy, shared string) {
	if s.cfg.Live == nil {
		s.changedAs(r, ChangedPolicies, auditLists, action, id)
		return
	}
	s.logChange(r, auditLists, action, id)
	s.cfg.Live.ListsChanged(policy, shared)
}

// changed logs a committed change and tells the owner of the configuration.
func (s *server) changed(r *http.Request, what, action, id string) {
	s.changedAs(r, what, what, action, id)
}

// changedAs is changed with the change audited under resource.
func (s *server) changedAs(r *http.Request, what, resource, action, id string) {
	s.logChange(r, resource, action, id)
	s.notify(what)
}

// notify tells the app of a committed change (Config.OnChange).
func (s *server) notify(what string) {
	if s.cfg.OnChange != nil {
		s.cfg.OnChange(what)
	}
}

// logChange logs a committed change and appends it to the audit log
// (who, what, which id, and attrs as detail). The change is committed
// already: an audit write that fails is logged and counted, and the
// answer stands.
func (s *server) logChange(r *http.Request, what, action, id string, attrs ...any) {
	who := identityFrom(r.Context())
	s.log.Info("api config change", append([]any{"what", what, "action", action, "id", id, "role", who.role, "actor", who.name}, attrs...)...)
	var detail strings.Builder
	for i := 0; i+1 < len(attrs); i += 2 {
		if detail.Len() > 0 {
			detail.WriteByte(' ')
		}
		fmt.Fprintf(&detail, "%v=%v", attrs[i], attrs[i+1])
	}
	rec := store.AuditRecord{Actor: who.name, TokenID: who.tokenID, Role: who.role, Action: action, Resource: what,
		Target: id, Detail: detail.String(), Client: r.RemoteAddr}
	if err := s.store.AppendAudit(context.WithoutCancel(r.Context()), &rec); err != nil {
		s.auditErrors.Inc()
		s.log.Error("audit log write failed", "action", action, "id", id, "err", err)
	}
}

type storeSearcher struct{ st store.Store }

func (s storeSearcher) Search(ctx context.Context, q store.CallQuery) ([]store.CallRecord, error) {
	return s.st.SearchCalls(ctx, q)
}
