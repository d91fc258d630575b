package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/webhook"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// WebhookTester sends a webhook a test event (the app's dispatcher).
type WebhookTester interface {
	Test(ctx context.Context, spec webhook.Spec) webhook.TestResult
}

// webhookView is a webhook as answered: never its secret, but whether it
// has one; the answer that makes one carries it once (Secret).
type webhookView struct {
	webhook.Spec
	SecretSet bool      `json:"secret_set"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func viewOf(spec webhook.Spec, rec store.WebhookRecord, showSecret bool) webhookView {
	v := webhookView{Spec: spec, SecretSet: spec.Secret != "", CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
	if !showSecret {
		v.Secret = ""
	}
	return v
}

func (s *server) getWebhookSpec(r *http.Request, name string) (webhook.Spec, store.WebhookRecord, error) {
	var spec webhook.Spec
	rec, err := s.store.GetWebhook(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return spec, rec, notFound("webhook %q not found", name)
	}
	if err != nil {
		return spec, rec, err
	}
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return spec, rec, fmt.Errorf("webhook %q: stored spec: %w", name, err)
	}
	return spec, rec, nil
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	recs, err := s.store.ListWebhooks(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]webhookView, 0, len(recs))
	for _, rec := range recs {
		var spec webhook.Spec
		if err := json.Unmarshal(rec.Spec, &spec); err != nil {
			s.fail(w, r, fmt.Errorf("webhook %q: stored spec: %w", rec.Name, err))
			return
		}
		out = append(out, viewOf(spec, rec, false))
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
}

func (s *server) getWebhook(w http.ResponseWriter, r *http.Request) {
	spec, rec, err := s.getWebhookSpec(r, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(spec, rec, false))
}

// readWebhook decodes and validates a webhook body.
func readWebhook(w http.ResponseWriter, r *http.Request) (webhook.Spec, error) {
	var in struct {
		webhook.Spec
		// Accepted and ignored, so a fetched webhook can be sent back.
		SecretSet *bool      `json:"secret_set"`
		CreatedAt *time.Time `json:"created_at"`
		UpdatedAt *time.Time `json:"updated_at"`
	}
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		return in.Spec, err
	}
	return in.Spec, nil
}

func validateWebhook(spec *webhook.Spec) error {
	if err := spec.Validate(); err != nil {
		var fe *webhook.FieldError
		if errors.As(err, &fe) {
			return badRequest(fe.Field, "%s", err.Error())
		}
		return err
	}
	return nil
}

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request) {
	spec, err := readWebhook(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Secret == "" {
		spec.Secret = webhook.NewSecret()
	}
	if err := validateWebhook(&spec); err != nil {
		s.fail(w, r, err)
		return
	}
	b, _ := json.Marshal(spec)
	rec := store.WebhookRecord{Name: spec.Name, Spec: b}
	if err := s.store.CreateWebhook(r.Context(), &rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = &apiError{Status: http.StatusConflict, Field: "name", Msg: fmt.Sprintf("webhook %q already exists", spec.Name)}
		}
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedWebhooks, "create webhook", spec.Name)
	writeJSON(w, http.StatusCreated, viewOf(spec, rec, true))
}

// updateWebhook replaces a webhook; without a secret in the body the
// stored one stays.
func (s *server) updateWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	spec, err := readWebhook(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Name != "" && spec.Name != name {
		s.fail(w, r, badRequest("name", "name: %q in the body differs from %q in the path; webhooks cannot be renamed", spec.Name, name))
		return
	}
	spec.Name = name
	old, _, err := s.getWebhookSpec(r, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Secret == "" {
		spec.Secret = old.Secret
	}
	if err := validateWebhook(&spec); err != nil {
		s.fail(w, r, err)
		return
	}
	b, _ := json.Marshal(spec)
	rec := store.WebhookRecord{Name: name, Spec: b}
	if err := s.store.UpdateWebhook(r.Context(), &rec); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedWebhooks, "update webhook", name)
	writeJSON(w, http.StatusOK, viewOf(spec, rec, false))
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.store.DeleteWebhook(r.Context(), name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("webhook %q not found", name)
		}
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedWebhooks, "delete webhook", name)
	w.WriteHeader(http.StatusNoContent)
}

// testWebhook sends the webhook one test event now and answers with what
// its endpoint did.
func (s *server) testWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Webhooks == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "webhooks are not available in this process"})
		return
	}
	if roleFrom(r.Context()) != RoleAdmin {
		writeError(w, http.StatusForbidden, "sending a test event needs the admin role", "")
		return
	}
	spec, _, err := s.getWebhookSpec(r, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Webhooks.Test(r.Context(), spec))
}
