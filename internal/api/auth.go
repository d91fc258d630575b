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

type identityKey struct{}

// identity is who a request comes from: the token's name and id (the
// bootstrap -admin-token is named "admin-token") and its role.
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

// authenticate resolves the bearer token to a role and enforces that viewers
// only read. It writes the error response itself and reports false then.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request) (identity, bool) {
	secret, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="signalbox"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>", "")
		return identity{}, false
	}
	role, who := "", identity{name: adminTokenName}
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
			return identity{}, false
		case err != nil:
			s.fail(w, r, err)
			return identity{}, false
		}
		role, who = tok.Role, identity{name: tok.Name, tokenID: tok.ID}
	}
	switch role {
	case RoleAdmin:
	case RoleTracer:
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.HasPrefix(r.URL.Path, "/api/v1/traces") {
			writeError(w, http.StatusForbidden, "this token has the tracer role, which may only read and trace subscribers", "")
			return identity{}, false
		}
		if strings.HasPrefix(r.URL.Path, "/api/v1/tokens") {
			writeError(w, http.StatusForbidden, "tokens are visible to the admin role only", "")
			return identity{}, false
		}
	case RoleViewer:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusForbidden, "this token has the viewer role, which may only read", "")
			return identity{}, false
		}
		// Token metadata is administration, not monitoring.
		if strings.HasPrefix(r.URL.Path, "/api/v1/tokens") {
			writeError(w, http.StatusForbidden, "tokens are visible to the admin role only", "")
			return identity{}, false
		}
	default:
		writeError(w, http.StatusForbidden, "token has unknown role "+role, "")
		return identity{}, false
	}
	who.role = role
	return who, true
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
