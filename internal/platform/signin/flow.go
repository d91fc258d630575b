package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/signalbox/signalbox/internal/platform/store"
)

// flowCookie carries one sign-in's state, nonce and PKCE verifier from
// /auth/login to /auth/callback (ten minutes at most).
const (
	flowCookie = "signalbox-signin"
	flowMaxAge = 10 * time.Minute
)

type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
}

// ServeHTTP serves /auth/...
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case r.URL.Path == "/auth/info" && r.Method == http.MethodGet:
		s.info(w)
	case !s.Enabled():
		http.NotFound(w, r)
	case r.URL.Path == "/auth/login" && r.Method == http.MethodGet:
		s.login(w, r)
	case r.URL.Path == CallbackPath && r.Method == http.MethodGet:
		s.callback(w, r)
	case r.URL.Path == "/auth/session" && r.Method == http.MethodGet:
		s.session(w, r)
	case r.URL.Path == "/auth/logout" && r.Method == http.MethodPost:
		s.logout(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Service) info(w http.ResponseWriter) {
	v := map[string]any{"oidc": s.Enabled()}
	if s.Enabled() {
		v["provider"] = s.cfg.ProviderName
		v["login"] = "/auth/login"
	}
	writeJSON(w, http.StatusOK, v)
}

// login sends the browser to the provider with a fresh state, nonce and
// PKCE challenge; the provider being down gets a page saying so.
func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	_, _, oc, err := s.discover(r.Context(), true)
	if err != nil {
		s.discoveryFailed(w, err)
		return
	}
	f := flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier()}
	b, _ := json.Marshal(f)
	s.setCookie(w, flowCookie, base64.RawURLEncoding.EncodeToString(b), "/auth/", flowMaxAge)
	http.Redirect(w, r, oc.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusFound)
}

// callback takes the provider's answer: checks the state, exchanges the
// code with the PKCE verifier, verifies the ID token, maps the groups to
// a role and starts a session.
func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	s.setCookie(w, flowCookie, "", "/auth/", -1)
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		s.count("refused")
		s.log.Info("sign-in refused by the identity provider", "error", e, "description", q.Get("error_description"), "client", r.RemoteAddr)
		s.page(w, http.StatusForbidden, "The identity provider refused the sign-in", e+": "+q.Get("error_description"))
		return
	}
	f, ok := readFlow(r)
	if !ok || q.Get("state") == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		s.count("invalid_state")
		s.page(w, http.StatusBadRequest, "This sign-in cannot be completed",
			"It was not started from this browser, or it took longer than ten minutes. Start again from the console.")
		return
	}
	_, _, oc, err := s.discover(r.Context(), false)
	if err != nil {
		s.discoveryFailed(w, err)
		return
	}
	tok, err := oc.Exchange(oidc.ClientContext(r.Context(), s.client), q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.count("exchange_failed")
		s.log.Warn("sign-in: code exchange failed", "issuer", s.cfg.Issuer, "err", err)
		s.page(w, http.StatusBadGateway, "The identity provider did not complete the sign-in", err.Error())
		return
	}
	id, err := s.identify(r.Context(), tok, f.Nonce)
	var nr *noRoleError
	switch {
	case errors.As(err, &nr):
		s.count("no_role")
		s.log.Warn("sign-in refused: no group mapped to a role", "name", nr.name, "subject", nr.subject, "groups", nr.groups)
		s.audit(r, store.AuditRecord{Actor: nr.name, TokenID: "oidc:" + nr.subject, Action: "refuse sign-in",
			Detail: "groups=" + strings.Join(nr.groups, ",")})
		s.page(w, http.StatusForbidden, "Signed in, but not allowed in", nr.Error())
		return
	case err != nil:
		s.count("invalid_token")
		s.log.Warn("sign-in refused: the ID token is not valid", "issuer", s.cfg.Issuer, "err", err)
		s.page(w, http.StatusForbidden, "The identity provider's answer was refused", err.Error())
		return
	}
	secret := random()
	se := store.Session{Hash: hashSecret(secret), Subject: id.subject, Name: id.name, Role: id.role, CSRF: random(),
		ExpiresAt: s.now().Add(s.cfg.SessionMaxAge)}
	if err := s.cfg.Store.CreateSession(r.Context(), &se); err != nil {
		s.count("error")
		s.log.Error("sign-in: storing the session failed", "err", err)
		s.page(w, http.StatusInternalServerError, "The sign-in could not be stored", err.Error())
		return
	}
	s.count("ok")
	s.log.Info("signed in", "name", id.name, "subject", id.subject, "role", id.role, "client", r.RemoteAddr)
	s.audit(r, store.AuditRecord{Actor: id.name, TokenID: "oidc:" + id.subject, Role: id.role, Action: "sign in",
		Detail: "groups=" + strings.Join(id.groups, ",")})
	s.setCookie(w, SessionCookie, secret, "/", s.cfg.SessionMaxAge)
	http.Redirect(w, r, "/", http.StatusFound)
}

// session answers who is signed in and the CSRF token changes must carry.
func (s *Service) session(w http.ResponseWriter, r *http.Request) {
	se, err := s.Lookup(r)
	switch {
	case errors.Is(err, ErrNoSession):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "not signed in"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"name": se.Name, "subject": se.Subject, "role": se.Role,
			"csrf": se.CSRF, "expires_at": se.ExpiresAt})
	}
}

// logout ends the session; it needs the CSRF token so that another site
// cannot sign a person out.
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	se, err := s.Lookup(r)
	if err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "not signed in"})
		return
	}
	if !CSRFOK(r, se) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "missing or wrong X-CSRF-Token"})
		return
	}
	if err := s.cfg.Store.DeleteSession(r.Context(), se.Hash); err != nil && !errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	s.log.Info("signed out", "name", se.Name, "subject", se.Subject)
	s.audit(r, store.AuditRecord{Actor: se.Name, TokenID: "oidc:" + se.Subject, Role: se.Role, Action: "sign out"})
	s.setCookie(w, SessionCookie, "", "/", -1)
	w.WriteHeader(http.StatusNoContent)
}

// setCookie sets (maxAge > 0) or clears (maxAge < 0) one of the sign-in
// cookies: HttpOnly, SameSite=Lax, Secure when the console is on https.
func (s *Service) setCookie(w http.ResponseWriter, name, value, path string, maxAge time.Duration) {
	age := -1
	if maxAge > 0 {
		age = int(maxAge / time.Second)
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: age, HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode})
}

// CSRFOK reports whether a request made with session se carries its CSRF
// token in X-CSRF-Token.
func CSRFOK(r *http.Request, se store.Session) bool {
	got := r.Header.Get("X-CSRF-Token")
	return got != "" && se.CSRF != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.CSRF)) == 1
}

func readFlow(r *http.Request) (flow, bool) {
	var f flow
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return f, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || json.Unmarshal(b, &f) != nil || f.State == "" || f.Verifier == "" {
		return f, false
	}
	return f, true
}

func (s *Service) audit(r *http.Request, rec store.AuditRecord) {
	rec.Resource, rec.Client = "sessions", r.RemoteAddr
	if rec.Target == "" {
		rec.Target = rec.Actor
	}
	if err := s.cfg.Store.AppendAudit(context.WithoutCancel(r.Context()), &rec); err != nil {
		s.log.Error("audit log write failed", "action", rec.Action, "name", rec.Actor, "err", err)
	}
}

func (s *Service) count(result string) { s.result.WithLabelValues(result).Inc() }

// random is 32 bytes from the system's CSPRNG, base64url.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
