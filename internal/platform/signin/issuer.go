package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// IssuerMismatchError is a provider that answers, under the configured
// issuer's discovery address, for another issuer: most often the same URL
// but for a trailing slash. OpenID Connect requires them to be the same
// string, so no sign-in can work until -oidc-issuer is corrected.
type IssuerMismatchError struct {
	Configured, Provider string
}

func (e *IssuerMismatchError) Error() string {
	return fmt.Sprintf("issuer mismatch: configured %q, the provider says %q (set -oidc-issuer to exactly the provider's issuer)",
		e.Configured, e.Provider)
}

// explain turns the error of a failed discovery into what is wrong: an
// *IssuerMismatchError when the provider answers for another issuer, else
// err itself (the provider cannot be reached, or does not answer as one).
func (s *Service) explain(ctx context.Context, err error) error {
	said, ferr := s.providerIssuer(ctx)
	if ferr == nil && said != "" && said != s.cfg.Issuer {
		return &IssuerMismatchError{Configured: s.cfg.Issuer, Provider: said}
	}
	return err
}

// providerIssuer is the issuer the provider's discovery document names.
func (s *Service) providerIssuer(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := strings.TrimSuffix(s.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s", u, resp.Status)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc); err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	return doc.Issuer, nil
}

// CheckIssuer asks the provider for its configuration, as a sign-in does,
// and reports what would stop every sign-in: an *IssuerMismatchError, or
// the provider not answering. nil when sign-in is off.
func (s *Service) CheckIssuer(ctx context.Context) error {
	if !s.Enabled() {
		return nil
	}
	_, _, _, err := s.discover(ctx, true)
	return err
}

// discoveryFailed answers a sign-in whose discovery failed: a page and a
// count that say whether signalbox is misconfigured or the provider down.
func (s *Service) discoveryFailed(w http.ResponseWriter, err error) {
	var mismatch *IssuerMismatchError
	if errors.As(err, &mismatch) {
		s.count("misconfigured")
		s.log.Error("sign-in: "+mismatch.Error(), "issuer", s.cfg.Issuer)
		s.page(w, http.StatusInternalServerError, "Sign-in is misconfigured",
			mismatch.Error()+". Nobody can sign in through the identity provider until an administrator corrects it; "+
				"an API token still works.")
		return
	}
	s.count("provider_down")
	s.log.Warn("sign-in: the identity provider does not answer", "issuer", s.cfg.Issuer, "err", err)
	s.page(w, http.StatusServiceUnavailable, "The identity provider does not answer",
		fmt.Sprintf("signalbox cannot reach %s (%v), so nobody can sign in through it now. "+
			"Try again later; an administrator can still use an API token.", s.cfg.Issuer, err))
}
