// Package signin signs people in to the console and the API through the
// company's OpenID Connect provider: the authorization-code flow with PKCE
// (coreos/go-oidc verifies the ID token, x/oauth2 runs the flow), the
// provider's groups mapped to signalbox's roles, and a session kept in the
// store behind a secure, HttpOnly cookie. Changes made with a session need
// its CSRF token in X-CSRF-Token (package api checks it). API tokens stay
// for machines; this package is only for people.
//
// Routes, under /auth/: info (is sign-in configured), login (to the
// provider), callback (back from it), session (who is signed in, and the
// CSRF token), logout.
package signin

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/oauth2"

	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// Roles, as the API names them.
const (
	RoleAdmin  = "admin"
	RoleTracer = "tracer"
	RoleViewer = "viewer"
)

// SessionCookie holds a signed-in person's session secret.
const SessionCookie = "signalbox-session"

// CallbackPath is where the provider sends the browser back; the
// configured redirect URL must end in it.
const CallbackPath = "/auth/callback"

// APIRoutes are the routes that answer JSON, which the OpenAPI document
// describes; /auth/login and the callback are a browser's navigations.
func APIRoutes() []string {
	return []string{"GET /auth/info", "GET /auth/session", "POST /auth/logout"}
}

// ErrNoSession: the request carries no session cookie, or one that is not
// (or no longer) a session.
var ErrNoSession = errors.New("no session")

// Config is the relying party's configuration. Issuer empty: sign-in is
// off (only /auth/info answers).
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this console's callback as registered at the
	// provider: https://signalbox.example.net/auth/callback. Its scheme
	// decides whether cookies are Secure.
	RedirectURL string
	Scopes      []string // "openid" is always asked for
	// RolesClaim names the claim holding the groups (a string or a list of
	// strings; a dotted path reaches into objects: realm_access.roles). It
	// is read from the ID token, or from the userinfo endpoint when the ID
	// token lacks it.
	RolesClaim string
	// The groups each role is given to; a person in several gets the
	// widest role (admin, then tracer, then viewer).
	AdminGroups, TracerGroups, ViewerGroups []string
	SessionMaxAge                           time.Duration
	// ProviderName is shown on the console's sign-in button.
	ProviderName string
	// CAFile is a PEM bundle for the provider's TLS certificate (a
	// private CA); empty: the system's roots.
	CAFile string

	Store      store.Store
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Service is the relying party. A nil *Service is not valid; New with an
// empty Issuer gives one that is off.
type Service struct {
	cfg    Config
	client *http.Client
	secure bool
	log    *slog.Logger
	result *prometheus.CounterVec
	now    func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
}

// New checks the configuration; it does not contact the provider, which
// is discovered at the first sign-in (and again after a failure), so that
// a provider that is down delays no start.
func New(cfg Config) (*Service, error) {
	s := &Service{cfg: cfg, log: cfg.Logger, now: time.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.result = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_signin_total",
		Help: "Console sign-ins through the OpenID Connect provider by result: ok, refused (by the provider), " +
			"invalid_state, provider_down, misconfigured (the provider answers for another issuer), exchange_failed, invalid_token, no_role, error.",
	}, []string{"result"})
	for _, r := range []string{"ok", "refused", "invalid_state", "provider_down", "misconfigured", "exchange_failed", "invalid_token", "no_role", "error"} {
		s.result.WithLabelValues(r)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.result); err != nil {
			return nil, fmt.Errorf("signin: register metrics: %w", err)
		}
	}
	if cfg.Issuer == "" {
		return s, nil
	}
	if cfg.Store == nil {
		return nil, errors.New("signin: Config.Store is required")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("signin: an OpenID Connect client id is required")
	}
	ru, err := url.Parse(cfg.RedirectURL)
	if err != nil || (ru.Scheme != "https" && ru.Scheme != "http") || ru.Host == "" || ru.Path != CallbackPath {
		return nil, fmt.Errorf("signin: redirect URL %q: want http(s)://<this console's host>%s", cfg.RedirectURL, CallbackPath)
	}
	s.secure = ru.Scheme == "https"
	if len(cfg.AdminGroups)+len(cfg.TracerGroups)+len(cfg.ViewerGroups) == 0 {
		return nil, errors.New("signin: no group is mapped to a role: nobody could sign in")
	}
	if s.cfg.RolesClaim == "" {
		s.cfg.RolesClaim = "groups"
	}
	if s.cfg.SessionMaxAge <= 0 {
		s.cfg.SessionMaxAge = 8 * time.Hour
	}
	if s.cfg.ProviderName == "" {
		s.cfg.ProviderName = "single sign-on"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pool, err := config.CAPool(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("signin: provider CA: %w", err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	s.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return s, nil
}

// Enabled reports whether sign-in through a provider is configured.
func (s *Service) Enabled() bool { return s.cfg.Issuer != "" }

// discover fetches the provider's configuration, or answers the one
// fetched before unless fresh. Each sign-in starts with a fresh one, so
// that a provider that is down gets a page of ours rather than a browser
// error, and a provider's new endpoints are followed.
func (s *Service) discover(ctx context.Context, fresh bool) (*oidc.Provider, *oidc.IDTokenVerifier, oauth2.Config, error) {
	s.mu.Lock()
	known := s.provider != nil
	if known && !fresh {
		defer s.mu.Unlock()
		return s.provider, s.verifier, s.oauth, nil
	}
	s.mu.Unlock()
	// The provider is asked without the lock: a slow one holds up this
	// sign-in, not the callbacks of others.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.client), s.cfg.Issuer)
	if err != nil {
		return nil, nil, oauth2.Config{}, s.explain(ctx, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil && s.provider.Endpoint() == p.Endpoint() && s.provider.UserInfoEndpoint() == p.UserInfoEndpoint() {
		return s.provider, s.verifier, s.oauth, nil // unchanged: keep the verifier's cached keys
	}
	scopes := []string{oidc.ScopeOpenID}
	for _, sc := range s.cfg.Scopes {
		if sc != oidc.ScopeOpenID && sc != "" {
			scopes = append(scopes, sc)
		}
	}
	s.provider = p
	s.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), s.client),
		&oidc.Config{ClientID: s.cfg.ClientID, Now: func() time.Time { return s.now() }})
	s.oauth = oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURL, Scopes: scopes}
	return s.provider, s.verifier, s.oauth, nil
}

// Lookup finds the session a request's cookie names: ErrNoSession when
// there is none (or it ended), another error when the store failed.
func (s *Service) Lookup(r *http.Request) (store.Session, error) {
	if !s.Enabled() {
		return store.Session{}, ErrNoSession
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return store.Session{}, ErrNoSession
	}
	se, err := s.cfg.Store.SessionByHash(r.Context(), hashSecret(c.Value), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return se, ErrNoSession
	}
	return se, err
}

// HasCookie reports whether the request carries a session cookie at all
// (so that a 401 can say the session ended rather than that none was sent).
func HasCookie(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	return err == nil && c.Value != ""
}

func hashSecret(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}
