package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/calllog"
	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/callcontrol/curri"
	"github.com/signalbox/signalbox/internal/callcontrol/livepolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/reputation"
	"github.com/signalbox/signalbox/internal/callcontrol/webhook"
	"github.com/signalbox/signalbox/internal/platform/api"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/platform/snmpnotify"
	"github.com/signalbox/signalbox/internal/platform/store"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config.Serve
	fs := newFlagSet("serve", "Runs the CURRI call-policy server, the data director (embedded Kafka broker, feeds,\nHTTP/2 ingest), the REST API and the console. Every flag can also be set by env\nSIGNALBOX_<FLAG_NAME> (e.g. SIGNALBOX_HTTP_ADDR) or in the -config YAML file;\nflags win over env, env over the file.", stderr)
	config.NewServeFlags(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := config.Resolve(fs, os.Getenv); err != nil {
		return usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	srv, err := Start(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return srv.Shutdown()
}

// Server is a running signalbox.
type Server struct {
	cfg     config.Serve
	log     *slog.Logger
	reg     *prometheus.Registry
	health  *obs.Health
	store   store.Store
	engine  *callpolicy.Engine
	calls   *calllog.Log
	token   string
	httpLn  net.Listener
	curriLn net.Listener
	pprofLn net.Listener // nil without -pprof-addr
	httpSrv *http.Server
	curriS  *curri.Server

	dir *directorParts // nil when the director is off

	node       string // -node-name, else the host name: in call records, traces and SNMP notifications (nodeIdentity)
	instance   string // node, with the process id when it is the host name: unique among running processes
	alarms     *obs.Alarms
	webhooks   *webhook.Dispatcher
	reputation *reputation.Client
	snmp       *snmpnotify.Notifier // nil without -snmp-managers
	curriWatch *curriWatch
	policies   *livepolicy.Manager

	parts      *supervisor   // every started part, stopped in reverse order
	feedsCh    chan struct{} // feed reconcile requests
	webhooksCh chan struct{} // webhook reload requests
	closed     sync.Once
}

// HTTPAddr is the bound address of the API/console listener.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// CURRIAddr is the bound address of the CURRI listener.
func (s *Server) CURRIAddr() string { return s.curriLn.Addr().String() }

// AdminToken is the API admin bearer token in effect.
func (s *Server) AdminToken() string { return s.token }

// Registry is the app's metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) serve(name string, srv *http.Server, ln net.Listener, useTLS bool) {
	if useTLS {
		s.serveWith(name, func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }, ln)
	} else {
		s.serveWith(name, srv.Serve, ln)
	}
}

func (s *Server) serveWith(name string, serve func(net.Listener) error, ln net.Listener) {
	if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("listener failed", "listener", name, "err", err)
		s.health.Pending(name, err.Error())
	}
}

// maxLoggedError bounds the Indeterminate reason kept per logged call.
const maxLoggedError = 240

func (s *Server) recordDecision(ev *curri.Event) {
	d := ev.Decision.Action.Decision
	if ev.Indeterminate {
		d = "indeterminate"
	}
	known := !ev.Indeterminate || ev.Err != "unknown policy"
	s.curriWatch.call(ev.Policy, known, ev.Indeterminate, ev.Latency, ev.Start)
	sent, errText := "", ev.Err
	if !ev.Indeterminate {
		sent = ev.Decision.Action.Sent()
	} else if len(errText) > maxLoggedError {
		errText = errText[:maxLoggedError] + "…"
	}
	rec := callrecord.Record{
		Version: callrecord.Version, Time: ev.Start, Node: s.node, Policy: ev.Policy,
		Calling: ev.Call.Calling, Called: ev.Call.Called,
		TransformedCalling: ev.Call.TransformedCalling, TransformedCalled: ev.Call.TransformedCalled,
		TriggerPoint: ev.Call.TriggerPoint, DeviceName: ev.Call.DeviceName,
		Decision: d, Step: string(ev.Decision.Step), RuleID: ev.Decision.RuleID, EntryID: ev.Decision.EntryID,
		Form: ev.Decision.Form, Sent: sent, Error: errText,
		LatencyMicros: ev.Latency.Microseconds(), Client: ev.Client,
	}
	s.calls.Record(storedCall(&rec)) // before any masking: the call log keeps whole numbers
	s.webhooks.Call(&rec)            // masks its own copy: its per-caller keys need the whole number
	if s.dir != nil && s.dir.stream != nil {
		rec.Mask(s.cfg.MaskNumbers)
		s.dir.stream.Record(&rec)
	}
}

// storedCall is the call log's record of a call record: every field of it
// but the version and node (the store is the node's own).
func storedCall(r *callrecord.Record) store.CallRecord {
	return store.CallRecord{
		Time: r.Time, Policy: r.Policy, Calling: r.Calling, Called: r.Called,
		TransformedCalling: r.TransformedCalling, TransformedCalled: r.TransformedCalled,
		TriggerPoint: r.TriggerPoint, DeviceName: r.DeviceName,
		Decision: r.Decision, Step: r.Step, RuleID: r.RuleID, EntryID: r.EntryID, Form: r.Form,
		Sent: r.Sent, Error: r.Error, LatencyMicros: r.LatencyMicros, Client: r.Client,
	}
}

// recordSearcher searches the stored xDRs, nil without the director.
func (s *Server) recordSearcher() api.RecordSearcher {
	if s.dir == nil || s.dir.records == nil {
		return nil
	}
	return s.dir.records
}

// traceDir is where subscriber traces write, empty without the director.
func (s *Server) traceDir() string {
	if s.dir == nil {
		return ""
	}
	return s.dir.traceDir
}

// callStream is the API's reader of the CALLS topic, nil without one.
func (s *Server) callStream() api.CallStreamReader {
	if s.dir == nil || s.dir.stream == nil {
		return nil
	}
	return s.dir.stream
}

// changed is called by the API after each committed config change.
func (s *Server) changed(what string) {
	switch what {
	case api.ChangedFeeds, api.ChangedTraces:
		select {
		case s.feedsCh <- struct{}{}:
		default:
		}
	case api.ChangedWebhooks:
		select {
		case s.webhooksCh <- struct{}{}:
		default:
		}
	default:
		s.policies.Changed()
	}
}

// webhooksLoop applies the stored webhooks to the dispatcher after API
// changes (kick), after the store's change notifications (other nodes) and
// whenever the periodic check finds a config version it has not applied.
func (s *Server) webhooksLoop(ctx context.Context) {
	applied := int64(-1)
	changes := s.store.Changes(ctx)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	apply := func(force bool) {
		v, err := s.store.ConfigVersion(ctx)
		if err != nil || (!force && v == applied) {
			return
		}
		recs, err := s.store.ListWebhooks(ctx)
		if err != nil {
			s.log.Warn("webhooks: read the store", "err", err)
			return
		}
		specs := make([]webhook.Spec, 0, len(recs))
		for _, rec := range recs {
			var spec webhook.Spec
			if err := json.Unmarshal(rec.Spec, &spec); err != nil {
				s.log.Error("webhooks: stored spec", "webhook", rec.Name, "err", err)
				continue
			}
			specs = append(specs, spec)
		}
		s.webhooks.Apply(specs)
		applied = v
	}
	apply(true)
	for {
		select {
		case <-ctx.Done():
			s.webhooks.Close()
			return
		case <-s.webhooksCh:
			apply(true)
		case <-changes:
			apply(true)
		case <-tick.C:
			apply(false)
		}
	}
}

// storeHealthLoop marks the store not ready while it is unreachable.
func (s *Server) storeHealthLoop(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := s.store.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.health.Pending("store", "unreachable: "+err.Error())
				s.alarms.Raise(alarmStoreUnreachable, "store", obs.Critical, "the "+s.store.Backend()+" store is unreachable: "+err.Error())
				s.log.Error("store unreachable", "err", err)
			} else {
				s.health.Ready("store")
				s.alarms.Clear(alarmStoreUnreachable, "store")
			}
		}
	}
}

func newLogger(cfg config.Serve, w io.Writer) *slog.Logger {
	var lvl slog.Level
	switch strings.ToLower(cfg.LogLevel) {
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// adminToken returns the configured token, or the one kept in the data dir,
// generating it on first start.
func adminToken(cfg config.Serve, log *slog.Logger) (string, error) {
	if cfg.AdminToken != "" {
		return cfg.AdminToken, nil
	}
	path := filepath.Join(cfg.DataDir, "admin-token")
	tok, made, err := keptSecret(path, "sbx_", 32)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if made {
		log.Info("API admin token generated; it is kept in the data dir (set -admin-token or SIGNALBOX_ADMIN_TOKEN to choose your own)",
			"token", tok, "path", path)
	} else {
		log.Info("API admin token read from the data dir", "path", path)
	}
	return tok, nil
}

// keptSecret is the secret kept in the file at path, or a new one of n
// random bytes (URL-safe base64 behind prefix) written there (0600) when
// there is none; made says which.
func keptSecret(path, prefix string, n int) (secret string, made bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	raw := make([]byte, n)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	secret = prefix + base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return secret, true, nil
}

func curriTLSConfig(cfg config.Serve) (*tls.Config, error) {
	if cfg.CURRITLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.CURRITLSCert, cfg.CURRITLSKey)
	if err != nil {
		return nil, fmt.Errorf("curri tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if cfg.CURRIClientCA != "" {
		pool, err := config.CAPool(cfg.CURRIClientCA)
		if err != nil {
			return nil, fmt.Errorf("curri client ca: %w", err)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// displayAddr turns ":4080" or "[::]:4080" into "localhost:4080" for logs.
func displayAddr(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// pruneAuditLoop drops audit records older than maxAge, at start and hourly.
func (s *Server) pruneAuditLoop(ctx context.Context, maxAge time.Duration) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		if n, err := s.store.PruneAudit(ctx, time.Now().Add(-maxAge)); err != nil && ctx.Err() == nil {
			s.log.Warn("pruning the audit log", "err", err)
		} else if n > 0 {
			s.log.Info("audit log pruned", "records", n, "older_than", maxAge)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
