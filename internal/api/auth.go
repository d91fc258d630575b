package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/signalbox/signalbox/internal/store"
)

type roleKey struct{}

func withRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

func roleFrom(ctx context.Context) string {
	role, _ := ctx.Value(roleKey{}).(string)
	return role
}

// hashToken is how token secrets are stored: hex SHA-256.
func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// authenticate resolves the bearer token to a role and enforces that viewers
// only read. It writes the error response itself and reports false then.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	secret, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="signalbox"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>", "")
		return "", false
	}
	role := ""
	if s.cfg.AdminToken != "" {
		// Compare hashes so that the comparison time depends on neither
		// the secret's content nor its length.
		a := sha256.Sum256([]byte(secret))
		b := sha256.Sum256([]byte(s.cfg.AdminToken))
		if subtle.ConstantTimeCompare(a[:], b[:]) == 1 {
			role = RoleAdmin
		}
	}
	if role == "" {
		tok, err := s.store.TokenByHash(r.Context(), hashToken(secret))
		switch {
		case errors.Is(err, store.ErrNotFound):
			w.Header().Set("WWW-Authenticate", `Bearer realm="signalbox", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "invalid bearer token", "")
			return "", false
		case err != nil:
			s.fail(w, r, err)
			return "", false
		}
		role = tok.Role
	}
	switch role {
	case RoleAdmin:
	case RoleViewer:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusForbidden, "this token has the viewer role, which may only read", "")
			return "", false
		}
		// Token metadata is administration, not monitoring.
		if strings.HasPrefix(r.URL.Path, "/api/v1/tokens") {
			writeError(w, http.StatusForbidden, "tokens are visible to the admin role only", "")
			return "", false
		}
	default:
		writeError(w, http.StatusForbidden, "token has unknown role "+role, "")
		return "", false
	}
	return role, true
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
