package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Session is a person signed in to the console through the identity
// provider (package signin). Hash is hex SHA-256 of the cookie's secret;
// CSRF is the value the console must echo in X-CSRF-Token on changes.
type Session struct {
	Hash      string    `json:"-"`
	Subject   string    `json:"subject"` // the provider's "sub"
	Name      string    `json:"name"`    // who, as the audit log names them
	Role      string    `json:"role"`
	CSRF      string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateSession stores a session and deletes the expired ones. Sessions
// are not configuration: they do not bump the config version.
func (s *sqlStore) CreateSession(ctx context.Context, se *Session) error {
	if se.Hash == "" || se.Subject == "" || se.Role == "" || se.ExpiresAt.IsZero() {
		return errors.New("session: hash, subject, role and expiry are required")
	}
	ts := now()
	err := s.write(ctx, false, func(t tx) error {
		if _, err := t.exec(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, ts.UnixMicro()); err != nil {
			return err
		}
		_, err := t.exec(ctx, `INSERT INTO sessions (hash, subject, name, role, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			se.Hash, se.Subject, se.Name, se.Role, se.CSRF, ts.UnixMicro(), se.ExpiresAt.UnixMicro())
		return err
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("session: %w", ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	se.CreatedAt = ts
	se.ExpiresAt = se.ExpiresAt.UTC().Truncate(time.Microsecond)
	return nil
}

// SessionByHash returns the session with that hash; ErrNotFound when there
// is none or it expired before now.
func (s *sqlStore) SessionByHash(ctx context.Context, hash string, at time.Time) (Session, error) {
	var se Session
	var created, expires int64
	err := s.b.queryRow(ctx, `SELECT hash, subject, name, role, csrf, created_at, expires_at FROM sessions WHERE hash = ? AND expires_at > ?`,
		hash, at.UnixMicro()).Scan(&se.Hash, &se.Subject, &se.Name, &se.Role, &se.CSRF, &created, &expires)
	if isNoRows(err) {
		return se, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return se, fmt.Errorf("session by hash: %w", err)
	}
	se.CreatedAt, se.ExpiresAt = fromUS(created), fromUS(expires)
	return se, nil
}

// DeleteSession ends a session (sign-out); ErrNotFound when there is none.
func (s *sqlStore) DeleteSession(ctx context.Context, hash string) error {
	err := s.write(ctx, false, func(t tx) error {
		n, err := t.exec(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		if err == nil && n == 0 {
			err = fmt.Errorf("session: %w", ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete session: %w", err)
	}
	return err
}
