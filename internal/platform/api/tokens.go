package api

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/signalbox/signalbox/internal/platform/store"
)

// tokenPrefix marks signalbox secrets so that secret scanners and people
// recognise them.
const tokenPrefix = "sbx_"

type tokenInput struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// createdToken is the only answer that ever carries the secret.
type createdToken struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

// newSecret returns a fresh token secret: 32 random bytes, base64url.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func newTokenID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("token id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (s *server) createToken(w http.ResponseWriter, r *http.Request) {
	var in tokenInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || utf8.RuneCountInString(in.Name) > 64 {
		s.fail(w, r, badRequest("name", "name: required, at most 64 characters"))
		return
	}
	if in.Role != RoleAdmin && in.Role != RoleViewer && in.Role != RoleTracer {
		s.fail(w, r, badRequest("role", "role: %q is not a role; use %q, %q or %q", in.Role, RoleAdmin, RoleViewer, RoleTracer))
		return
	}
	secret, err := newSecret()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := newTokenID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tok := store.Token{ID: id, Name: in.Name, Role: in.Role, Hash: hashToken(secret), CreatedAt: s.now().UTC()}
	if err := s.store.CreateToken(r.Context(), &tok); err != nil {
		s.fail(w, r, err)
		return
	}
	s.logChange(r, changedTokens, "create token", tok.ID, "name", tok.Name, "role", tok.Role)
	writeJSON(w, http.StatusCreated, createdToken{ID: tok.ID, Name: tok.Name, Role: tok.Role, Token: secret, CreatedAt: tok.CreatedAt})
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.store.ListTokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if toks == nil {
		toks = []store.Token{}
	}
	// store.Token never encodes its hash (json:"-").
	writeJSON(w, http.StatusOK, map[string]any{"tokens": toks})
}

func (s *server) deleteToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.store.DeleteToken(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("token %q not found", id)
		}
		s.fail(w, r, err)
		return
	}
	s.logChange(r, changedTokens, "delete token", id)
	w.WriteHeader(http.StatusNoContent)
}
