package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// slugRE is the shape of policy ids: they appear in CURRI URLs (/curri/{id}).
var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// policyInput is a policy as clients send it. The read-only timestamps are
// accepted (and ignored) so that a body fetched with GET can be PUT back.
type policyInput struct {
	ID            string                 `json:"id"`
	Name          string                 `json:"name"`
	Description   string                 `json:"description"`
	DefaultAction *callpolicy.Action     `json:"default_action"`
	RateLimit     *callpolicy.RateLimit  `json:"rate_limit"`
	AllowAction   *callpolicy.Action     `json:"allow_action"`
	BlockAction   *callpolicy.Action     `json:"block_action"`
	Reputation    *callpolicy.Reputation `json:"reputation"`
	CreatedAt     *time.Time             `json:"created_at"`
	UpdatedAt     *time.Time             `json:"updated_at"`
}

func (in *policyInput) policy(id string) callpolicy.Policy {
	p := callpolicy.Policy{
		ID:          id,
		Name:        in.Name,
		Description: in.Description,
		RateLimit:   in.RateLimit,
		AllowAction: in.AllowAction,
		BlockAction: in.BlockAction,
		Reputation:  in.Reputation,
	}
	if p.Name == "" {
		p.Name = id
	}
	// Without a default action a call no rule matched continues, which is
	// what CUCM does itself when no policy objects.
	p.DefaultAction = callpolicy.Action{Decision: callpolicy.Permit}
	if in.DefaultAction != nil {
		p.DefaultAction = *in.DefaultAction
	}
	return p
}

func checkSlug(field, id string) error {
	if !slugRE.MatchString(id) {
		return badRequest(field, "%s: %q is not a valid policy id (lower-case letters, digits, _ and -, starting with a letter or digit, at most 64)", field, id)
	}
	return nil
}

// policyExists answers 404 for an unknown policy, for the sub-resources.
func (s *server) policyExists(r *http.Request, id string) error {
	if _, err := s.store.GetPolicy(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("policy %q not found", id)
		}
		return err
	}
	return nil
}

func (s *server) listPolicies(w http.ResponseWriter, r *http.Request) {
	ps, err := s.store.ListPolicies(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ps == nil {
		ps = []callpolicy.Policy{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"policies": ps})
}

func (s *server) getPolicy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := s.store.GetPolicy(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		err = notFound("policy %q not found", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *server) createPolicy(w http.ResponseWriter, r *http.Request) {
	var in policyInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkSlug("id", in.ID); err != nil {
		s.fail(w, r, err)
		return
	}
	p := in.policy(in.ID)
	if err := s.checkPolicy(r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.CreatePolicy(r.Context(), &p); err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = &apiError{Status: http.StatusConflict, Field: "id", Msg: "policy \"" + p.ID + "\" already exists"}
		}
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedPolicies, "create policy", p.ID)
	s.respondPolicy(w, r, http.StatusCreated, p)
}

func (s *server) updatePolicy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in policyInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.ID != "" && in.ID != id {
		s.fail(w, r, badRequest("id", "id: %q in the body differs from %q in the path; policies cannot be renamed", in.ID, id))
		return
	}
	old, err := s.storedPolicy(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.replacePolicy(w, r, id, &in, old)
}

// patchPolicy changes some of a policy's settings (RFC 7396 JSON merge
// patch): what the body names is set, null removes it, the rest stays as
// it is. PUT, by contrast, replaces the whole policy.
func (s *server) patchPolicy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := requireJSON(r); err != nil {
		s.fail(w, r, err)
		return
	}
	patch, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	old, err := s.storedPolicy(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cur, err := json.Marshal(old)
	if err == nil {
		cur, err = mergePatch(cur, patch)
	}
	var in policyInput
	if err == nil {
		err = decodeJSONBytes(cur, &in)
	}
	if err == nil && in.ID != id {
		err = badRequest("id", "id: %q in the patch differs from %q in the path; policies cannot be renamed", in.ID, id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.replacePolicy(w, r, id, &in, old)
}

// storedPolicy is the stored policy id, or a 404 naming it.
func (s *server) storedPolicy(r *http.Request, id string) (callpolicy.Policy, error) {
	p, err := s.store.GetPolicy(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		err = notFound("policy %q not found", id)
	}
	return p, err
}

// replacePolicy stores in as policy id, which was old.
func (s *server) replacePolicy(w http.ResponseWriter, r *http.Request, id string, in *policyInput, old callpolicy.Policy) {
	p := in.policy(id)
	p.CreatedAt = old.CreatedAt
	if err := s.checkPolicy(r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.UpdatePolicy(r.Context(), &p); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedPolicies, "update policy", id)
	s.respondPolicy(w, r, http.StatusOK, p)
}

// mergePatch applies an RFC 7396 JSON merge patch to the JSON document
// target.
func mergePatch(target, patch []byte) ([]byte, error) {
	var t, p any
	dec := json.NewDecoder(bytes.NewReader(target))
	dec.UseNumber()
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	dec = json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, jsonError(err)
	}
	if _, ok := p.(map[string]any); !ok {
		return nil, badRequest("", "a merge patch (RFC 7396) of a policy is a JSON object of the settings to change")
	}
	return json.Marshal(mergeValue(t, p))
}

func mergeValue(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergeValue(tm[k], v)
		}
	}
	return tm
}

// respondPolicy answers with the policy as stored (with its timestamps).
func (s *server) respondPolicy(w http.ResponseWriter, r *http.Request, status int, p callpolicy.Policy) {
	if stored, err := s.store.GetPolicy(r.Context(), p.ID); err == nil {
		p = stored
	}
	writeJSON(w, status, p)
}

func (s *server) deletePolicy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == callpolicy.DefaultPolicyID {
		s.fail(w, r, &apiError{Status: http.StatusConflict, Field: "id",
			Msg: `the "default" policy cannot be deleted: CURRI requests without a policy in the URL are evaluated against it; change its rules instead`})
		return
	}
	if err := s.store.DeletePolicy(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("policy %q not found", id)
		}
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedPolicies, "delete policy", id)
	w.WriteHeader(http.StatusNoContent)
}

// checkPolicy validates a policy's own settings (create, update) and the
// directories its actions name.
func (s *server) checkPolicy(r *http.Request, p *callpolicy.Policy) error {
	if err := callpolicy.ValidatePolicy(p); err != nil {
		return err
	}
	return s.checkDirectories(r, &callpolicy.PolicyConfig{Policy: *p}, false)
}
