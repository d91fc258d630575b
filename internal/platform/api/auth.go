package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/signalbox/signalbox/internal/platform/signin"
	"github.com/signalbox/signalbox/internal/platform/store"
)

type identityKey struct{}

// identity is who a request comes from: the token's name and id (the
// bootstrap -admin-token is named "admin-token") and its role; for a
// person signed in through the identity provider, their name, "oidc:" and
// their subject, and the role their groups give.
type identity struct {
	name, tokenID, role string
}

// adminTokenName names the bootstrap admin token in the audit log.
const adminTokenName = "admin-token"

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityFrom(ctx context.Context) identity {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id
}

func roleFrom(ctx context.Context) string { return identityFrom(ctx).role }

// hashToken is how token secrets are stored: hex SHA-256.
func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// authenticate resolves the bearer token, or else the console's sign-in
// session cookie, to a role and enforces what the role may do. A change
// made with a session must carry its CSRF token. It writes the error
// response itself and reports false then.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request) (identity, bool) {
	who, holder, ok := s.whoIs(w, r)
	if !ok {
		return identity{}, false
	}
	switch who.role {
	case RoleAdmin:
	case RoleTracer:
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.HasPrefix(r.URL.Path, "/api/v1/traces") {
			writeError(w, http.StatusForbidden, holder+" the tracer role, which may only read and trace subscribers", "")
			return identity{}, false
		}
		if strings.HasPrefix(r.URL.Path, "/api/v1/tokens") {
			writeError(w, http.StatusForbidden, "tokens are visible to the admin role only", "")
			return identity{}, false
		}
	case RoleViewer:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusForbidden, holder+" the viewer role, which may only read", "")
			return identity{}, false
		}
		// Token metadata is administration, not monitoring.
		if strings.HasPrefix(r.URL.Path, "/api/v1/tokens") {
			writeError(w, http.StatusForbidden, "tokens are visible to the admin role only", "")
			return identity{}, false
		}
	default:
		writeError(w, http.StatusForbidden, holder+" unknown role "+who.role, "")
		return identity{}, false
	}
	return who, true
}

// whoIs finds who a request comes from: a bearer token, or a sign-in
// session. holder names it in answers ("this token has").
func (s *server) whoIs(w http.ResponseWriter, r *http.Request) (who identity, holder string, ok bool) {
	secret, hasBearer := bearer(r)
	if !hasBearer && s.cfg.Sessions != nil && signin.HasCookie(r) {
		se, err := s.cfg.Sessions.Lookup(r)
		switch {
		case errors.Is(err, signin.ErrNoSession):
			writeError(w, http.StatusUnauthorized, "your sign-in session has ended: sign in again", "")
			return who, "", false
		case err != nil:
			s.fail(w, r, err)
			return who, "", false
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !signin.CSRFOK(r, se) {
			writeError(w, http.StatusForbidden, "a change made with a sign-in session needs its X-CSRF-Token (GET /auth/session gives it)", "")
			return who, "", false
		}
		return identity{name: se.Name, tokenID: "oidc:" + se.Subject, role: se.Role}, "you have", true
	}
	if !hasBearer {
		w.Header().Set("WWW-Authenticate", `Bearer realm="signalbox"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token> (or sign in to the console)", "")
		return who, "", false
	}
	who = identity{name: adminTokenName}
	if s.cfg.AdminToken != "" {
		// Compare hashes so that the comparison time depends on neither
		// the secret's content nor its length.
		a := sha256.Sum256([]byte(secret))
		b := sha256.Sum256([]byte(s.cfg.AdminToken))
		if subtle.ConstantTimeCompare(a[:], b[:]) == 1 {
			who.role = RoleAdmin
			return who, "this token has", true
		}
	}
	tok, err := s.store.TokenByHash(r.Context(), hashToken(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		w.Header().Set("WWW-Authenticate", `Bearer realm="signalbox", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "invalid bearer token", "")
		return who, "", false
	case err != nil:
		s.fail(w, r, err)
		return who, "", false
	}
	return identity{name: tok.Name, tokenID: tok.ID, role: tok.Role}, "this token has", true
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	secret = strings.TrimSpace(secret)
	return secret, secret != ""
}
