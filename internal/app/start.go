package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/calllog"
	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/curri"
	"github.com/signalbox/signalbox/internal/callcontrol/livepolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/ratesync"
	"github.com/signalbox/signalbox/internal/callcontrol/reputation"
	"github.com/signalbox/signalbox/internal/callcontrol/webhook"
	"github.com/signalbox/signalbox/internal/datadirector/trace"
	"github.com/signalbox/signalbox/internal/platform/api"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/platform/signin"
	"github.com/signalbox/signalbox/internal/platform/store"
	"github.com/signalbox/signalbox/internal/platform/web"
)

// Start builds and starts everything, in order, each part registered with
// the supervisor as it comes up (Shutdown stops them in reverse); it returns
// once every listener is up. logOut receives the logs.
func Start(ctx context.Context, cfg config.Serve, logOut io.Writer) (_ *Server, err error) {
	log := newLogger(cfg, logOut)
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// s is a local, not the named result: an error return sets the result
	// to nil, and the deferred stop and the goroutines started below must
	// keep the server they belong to.
	s := &Server{
		cfg:        cfg,
		log:        log,
		reg:        obs.NewRegistry(Version),
		health:     obs.NewHealth(),
		parts:      newSupervisor(ctx, log),
		feedsCh:    make(chan struct{}, 1),
		webhooksCh: make(chan struct{}, 1),
	}
	// A Start that fails stops what it started, the last first.
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.parts.stop(sctx)
		}
	}()
	s.node, s.instance = nodeIdentity(cfg)
	s.alarms = obs.NewAlarms(s.reg)
	s.alarms.Declare(alarmKinds...)
	if cfg.SNMPManagers != "" {
		if s.snmp, err = newSNMPNotifier(cfg, s.node, s.reg, log); err != nil {
			return nil, err
		}
		s.alarms.Subscribe(s.snmp.Notify)
		s.snmp.Start()
		s.parts.add("snmp notifier", func(ctx context.Context) error { s.snmp.Stop(ctx); return nil })
	}
	s.curriWatch = newCURRIWatch()
	for _, c := range []string{"store", "http", "curri"} {
		s.health.Pending(c, "starting")
	}

	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	if err := s.startCallPolicy(ctx); err != nil {
		return nil, err
	}
	if cfg.Director {
		s.health.Pending("director", "starting")
		if s.dir, err = startDirector(ctx, s); err != nil {
			return nil, fmt.Errorf("director: %w", err)
		}
		s.health.Ready("director")
	}
	if err := s.startCURRI(); err != nil {
		return nil, err
	}
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	if err := s.startPprof(); err != nil {
		return nil, err
	}
	s.startLoops()
	ls := s.Listeners()
	if err := config.WriteListeners(cfg.DataDir, ls); err != nil {
		return nil, err
	}
	s.parts.add("listeners file", func(context.Context) error { config.RemoveListeners(cfg.DataDir, ls.PID); return nil })
	log.Info("signalbox ready", "version", Version, "http", ls.HTTP, "curri", ls.CURRI, "kafka", ls.Kafka, "ingest", ls.Ingest,
		"curri_url", "http://"+displayAddr(ls.CURRI)+"/curri/default", "listeners_file", filepath.Join(cfg.DataDir, config.ListenersFile))
	return s, nil
}

// nodeIdentity is this serve's name among the nodes sharing a store
// (-node-name, else the host name: stable across restarts, as traces are
// placed on a node by it) and its instance, which no other process running
// at once has (the name, with the process id when it is the host's): what
// the rate-limit sync tells apart.
func nodeIdentity(cfg config.Serve) (name, instance string) {
	if cfg.NodeName != "" {
		return cfg.NodeName, cfg.NodeName
	}
	host, _ := os.Hostname()
	return host, fmt.Sprintf("%s/%d", host, os.Getpid())
}

// Listeners is where this serve listens, as its listeners file says.
func (s *Server) Listeners() config.Listeners {
	l := config.Listeners{PID: os.Getpid(), HTTP: s.HTTPAddr(), CURRI: s.CURRIAddr(), Ingest: s.IngestAddr()}
	if s.pprofLn != nil {
		l.Pprof = s.pprofLn.Addr().String()
	}
	if s.dir != nil && s.dir.broker != nil {
		l.Kafka, l.KafkaAdvertised = s.dir.broker.ListenAddr(), s.dir.broker.Addrs()[0]
	}
	return l
}

// openStore opens the config store (migrating it) and finds the admin token.
func (s *Server) openStore(ctx context.Context) (err error) {
	st, err := store.Open(ctx, store.Options{DSN: s.cfg.Store, DataDir: s.cfg.DataDir, Logger: s.log})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.store = st
	s.parts.add("store", func(context.Context) error { return st.Close() })
	s.health.Ready("store")
	s.log.Info("store open", "backend", s.store.Backend())

	if s.token, err = adminToken(s.cfg, s.log); err != nil {
		return err
	}
	return nil
}

// startCallPolicy builds the policy engine and its live snapshot, the
// webhooks and the call log.
func (s *Server) startCallPolicy(ctx context.Context) (err error) {
	s.engine = callpolicy.NewEngine(s.reg)
	if s.reputation, err = reputation.New(reputation.Config{Registerer: s.reg, Logger: s.log}); err != nil {
		return err
	}
	s.engine.SetReputer(s.reputation)
	if s.webhooks, err = webhook.New(webhook.Config{Node: s.node, Registerer: s.reg, Logger: s.log, MaskNumbers: s.cfg.MaskNumbers}); err != nil {
		return err
	}
	s.alarms.Subscribe(s.webhooks.Alarm)
	s.policies = livepolicy.New(livepolicy.Config{Engine: s.engine, Store: s.store, Registerer: s.reg, Logger: s.log})
	if err := s.policies.Load(ctx); err != nil {
		return err
	}
	// Hit counts are persisted once CURRI, which counts them, has stopped.
	s.parts.add("rule hit counts", func(ctx context.Context) error { s.policies.FlushHits(ctx); return nil })
	s.calls = calllog.New(s.store, calllog.Config{MaxAge: s.cfg.CallLogMaxAge, MaxRows: s.cfg.CallLogMaxRows}, s.reg, s.log)
	s.parts.run("call log", s.calls.Run) // its stop writes what is queued
	return nil
}

// startCURRI opens the CURRI listener.
func (s *Server) startCURRI() error {
	aliases, err := config.ParseAliases(s.cfg.CURRIAliases)
	if err != nil {
		return fmt.Errorf("-curri-aliases: %w", err)
	}
	h, err := curri.NewHandler(curri.HandlerConfig{
		Decider:    s.engine,
		OnDecision: s.recordDecision,
		OnHead:     func(policy string, known bool) { s.curriWatch.head(policy, known, time.Now()) },
		Aliases:    aliases,
		Registerer: s.reg,
		Logger:     s.log,
	})
	if err != nil {
		return err
	}
	curriTLS, err := curriTLSConfig(s.cfg)
	if err != nil {
		return err
	}
	if s.curriLn, err = net.Listen("tcp", s.cfg.CURRIAddr); err != nil {
		return fmt.Errorf("curri listener: %w", err)
	}
	s.curriS = curri.NewServer(s.cfg.CURRIAddr, h, curriTLS)
	s.parts.add("curri listener", func(ctx context.Context) error { return shutdownListener(ctx, s.curriS, s.curriLn) })
	if nets, _ := config.ParseNetworks(s.cfg.CURRIAllowFrom); len(nets) > 0 || s.cfg.CURRIClientNames != "" || s.cfg.CURRIMaxConnsPerClient > 0 {
		s.curriS.Access = &curri.Access{Networks: nets, Names: config.SplitList(s.cfg.CURRIClientNames), MaxConnsPerClient: s.cfg.CURRIMaxConnsPerClient}
		s.log.Info("curri clients restricted", "networks", s.cfg.CURRIAllowFrom, "certificate_names", s.cfg.CURRIClientNames,
			"max_conns_per_client", s.cfg.CURRIMaxConnsPerClient)
	}
	go s.serveWith("curri", s.curriS.Serve, s.curriLn)
	s.health.Ready("curri")
	return nil
}

// startHTTP opens the API, console, sign-in, metrics and health listener.
func (s *Server) startHTTP() error {
	signIn, err := signin.New(signin.Config{Issuer: s.cfg.OIDCIssuer, ClientID: s.cfg.OIDCClientID, ClientSecret: s.cfg.OIDCClientSecret,
		RedirectURL: s.cfg.OIDCRedirectURL, Scopes: config.SplitList(s.cfg.OIDCScopes), RolesClaim: s.cfg.OIDCRolesClaim,
		AdminGroups: config.SplitList(s.cfg.OIDCAdminGroups), TracerGroups: config.SplitList(s.cfg.OIDCTracerGroups),
		ViewerGroups: config.SplitList(s.cfg.OIDCViewerGroups), SessionMaxAge: s.cfg.OIDCSessionMaxAge,
		ProviderName: s.cfg.OIDCProviderName, CAFile: s.cfg.OIDCCA, Store: s.store, Logger: s.log.With("component", "signin"), Registerer: s.reg})
	if err != nil {
		return err
	}
	if signIn.Enabled() {
		s.log.Info("console sign-in through OpenID Connect", "issuer", s.cfg.OIDCIssuer, "client_id", s.cfg.OIDCClientID, "roles_claim", s.cfg.OIDCRolesClaim)
		// Asked once at start, beside it: a misconfiguration is said
		// before the first person tries to sign in; serve starts anyway.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			var mismatch *signin.IssuerMismatchError
			switch err := signIn.CheckIssuer(ctx); {
			case errors.As(err, &mismatch):
				s.log.Warn("console sign-in will fail: "+mismatch.Error(), "issuer", s.cfg.OIDCIssuer)
			case err != nil:
				s.log.Warn("console sign-in: the identity provider does not answer yet", "issuer", s.cfg.OIDCIssuer, "err", err)
			}
		}()
	}
	apiH, err := api.New(api.Config{
		Store:            s.store,
		Policies:         s.engine,
		Feeds:            s.feedRuntime(),
		KafkaCredentials: s.kafkaCredentials(),
		Calls:            s.calls,
		OnChange:         s.changed,
		Live:             s.policies,
		AdminToken:       s.token,
		Sessions:         signIn,
		Alarms:           s.alarms,
		Gatherer:         s.reg,
		Exporter:         s.exporter(),
		Capturer:         s.capturer(),
		CaptureMax:       s.cfg.CaptureMax,
		Webhooks:         s.webhooks,
		CallStream:       s.callStream(),
		TraceDir:         s.traceDir(),
		Records:          s.recordSearcher(),
		MaskNumbers:      s.cfg.MaskNumbers,
		MaskReveal:       config.SplitList(s.cfg.MaskNumbersReveal),
		TraceLimits:      trace.Limits{MaxMinutes: s.cfg.TraceMaxMinutes, MaxBytes: s.cfg.TraceMaxBytes, Retention: s.cfg.TraceRetention},
		MaxTraces:        s.cfg.TraceMax,
		Node:             s.node,
		Site:             s.siteState(),
		SiteName:         s.cfg.Site,
		Logger:           s.log,
		Registerer:       s.reg,
		Version:          VersionString(),
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", apiH)
	mux.Handle("/auth/", signIn)
	mux.Handle("GET /metrics", obs.MetricsHandler(s.reg))
	mux.Handle("GET /healthz", obs.LiveHandler())
	mux.Handle("GET /readyz", s.health.ReadyHandler())
	mux.Handle("/", web.Handler())
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	s.httpSrv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.parts.add("http listener", func(ctx context.Context) error { return shutdownListener(ctx, s.httpSrv, s.httpLn) })
	go s.serve("http", s.httpSrv, s.httpLn, false)
	s.health.Ready("http")
	return nil
}

// startPprof serves profiles on their own listener, never on the API's: it
// is for the operator's loopback, and unauthenticated.
func (s *Server) startPprof() (err error) {
	if s.cfg.PprofAddr == "" {
		return nil
	}
	if s.pprofLn, err = net.Listen("tcp", s.cfg.PprofAddr); err != nil {
		return fmt.Errorf("pprof listener: %w", err)
	}
	pm := http.NewServeMux()
	pm.HandleFunc("/debug/pprof/", pprof.Index)
	pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
	pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: pm, ReadHeaderTimeout: 10 * time.Second}
	go s.serveWith("pprof", srv.Serve, s.pprofLn)
	s.parts.add("pprof listener", func(ctx context.Context) error { return shutdownListener(ctx, srv, s.pprofLn) })
	s.log.Info("pprof profiles served", "addr", s.pprofLn.Addr().String())
	return nil
}

// startLoops starts the background loops: alarms, policy reloads, store
// health, webhooks, audit pruning, rate-limit sync, feed reconciling.
func (s *Server) startLoops() {
	s.parts.loop("alarms", s.alarmLoop)
	s.parts.loop("policy reloads", s.policies.Run)
	s.parts.loop("store health", s.storeHealthLoop)
	s.parts.loop("webhooks", s.webhooksLoop)
	if s.cfg.AuditMaxAge > 0 {
		s.parts.loop("audit pruning", func(ctx context.Context) { s.pruneAuditLoop(ctx, s.cfg.AuditMaxAge) })
	}
	if s.store.Backend() == "postgres" && s.cfg.RateLimitSync > 0 {
		sync := ratesync.New(ratesync.Config{Engine: s.engine, Store: s.store, Node: s.instance, Every: s.cfg.RateLimitSync,
			Alarms: s.alarms, Registerer: s.reg, Logger: s.log})
		s.parts.loop("rate limit sync", sync.Run)
		s.log.Info("rate limits hold across the nodes of the store", "node", s.instance, "sync_every", s.cfg.RateLimitSync)
	}
	if s.dir != nil {
		s.parts.loop("feed reconcile", func(ctx context.Context) { s.dir.reconcileLoop(ctx, s.store, s.feedsCh) })
	}
}
