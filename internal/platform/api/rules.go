package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// ruleInput is a rule as clients send it. Enabled is a pointer so that an
// omitted "enabled" means true. The read-only fields (hits, timestamps) are
// accepted and ignored so that rules fetched with GET can be sent back.
type ruleInput struct {
	ID          int64                `json:"id"`
	PolicyID    string               `json:"policy_id"`
	Priority    int                  `json:"priority"`
	Enabled     *bool                `json:"enabled"`
	Match       callpolicy.Match     `json:"match"`
	Action      callpolicy.Action    `json:"action"`
	Schedule    *callpolicy.Schedule `json:"schedule"`
	ExpiresAt   *time.Time           `json:"expires_at"`
	Description string               `json:"description"`
	Tags        []string             `json:"tags"`

	Hits      int64      `json:"hits"`
	LastHitAt *time.Time `json:"last_hit_at"`
	CreatedAt *time.Time `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`
}

func (in *ruleInput) rule(policyID string) callpolicy.Rule {
	r := callpolicy.Rule{
		PolicyID:    policyID,
		Priority:    in.Priority,
		Enabled:     true,
		Match:       in.Match,
		Action:      in.Action,
		Schedule:    in.Schedule,
		ExpiresAt:   in.ExpiresAt,
		Description: in.Description,
		Tags:        in.Tags,
	}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	return r
}

// checkPolicyID refuses a body that names another policy than the path.
func (in *ruleInput) checkPolicyID(field, policyID string) error {
	if in.PolicyID != "" && in.PolicyID != policyID {
		return badRequest(field, "%s: %q differs from policy %q; rules cannot move between policies", field, in.PolicyID, policyID)
	}
	return nil
}

func ruleID(r *http.Request) (int64, error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, notFound("rule %q not found: rule ids are positive integers", raw)
	}
	return id, nil
}

func (s *server) listRules(w http.ResponseWriter, r *http.Request) {
	pid := r.PathValue("id")
	if err := s.policyExists(r, pid); err != nil {
		s.fail(w, r, err)
		return
	}
	rules, err := s.store.ListRules(r.Context(), pid)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rules == nil {
		rules = []callpolicy.Rule{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"rules": rules})
}

func (s *server) createRule(w http.ResponseWriter, r *http.Request) {
	pid := r.PathValue("id")
	var in ruleInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.policyExists(r, pid); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := in.checkPolicyID("policy_id", pid); err != nil {
		s.fail(w, r, err)
		return
	}
	rule := in.rule(pid)
	if err := s.checkRule(r, &rule); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.CreateRule(r.Context(), &rule); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditRules, "create rule", strconv.FormatInt(rule.ID, 10))
	writeJSON(w, http.StatusCreated, rule)
}

// replaceRules is the bulk load: every rule is validated before any is
// written, and the store swaps them in one transaction.
func (s *server) replaceRules(w http.ResponseWriter, r *http.Request) {
	pid := r.PathValue("id")
	if err := requireJSON(r); err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(w, r, maxBulkBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, hooked, err := s.storeReplacement(r, pid, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if hooked {
		s.logChange(r, auditRules, "replace rules", pid, "rules", n)
	} else {
		s.changedAs(r, ChangedPolicies, auditRules, "replace rules", pid)
	}
	// The rules themselves are not echoed: a bulk load can be 100,000.
	writeJSON(w, http.StatusOK, map[string]any{"policy_id": pid, "rules": n})
}

// storeReplacement decodes and validates a bulk body of policy pid's rules
// and has the store replace the policy's rules with them, telling
// Config.Live (Replacing) if set. It returns the number of rules.
func (s *server) storeReplacement(r *http.Request, pid string, body []byte) (n int, hooked bool, err error) {
	if n, done, err := s.incrementalReplacement(r, pid, body); done {
		return n, true, err
	}
	// Each rule is converted and validated as it is decoded; the first
	// invalid one is reported only once the whole body has decoded and the
	// policy is known to exist, as a body that does not decode is a 400 and
	// an unknown policy a 404 whatever the rules say.
	rules := make([]callpolicy.Rule, 0, bulkSizeHint(body))
	var invalid error
	isArray, err := decodeBulkRules(body, func(i int, in *ruleInput, raw []byte) {
		if i == 0 {
			rules, invalid = rules[:0], nil
		}
		if invalid != nil {
			return
		}
		// The field name is only formatted on failure.
		if in.PolicyID != "" && in.PolicyID != pid {
			invalid = in.checkPolicyID(fmt.Sprintf("rules[%d].policy_id", i), pid)
			return
		}
		rules = append(rules, in.rule(pid))
		if raw != nil {
			rules[i].SrcHash = ruleHash(raw)
		}
		if err := callpolicy.ValidateRule(&rules[i]); err != nil {
			invalid = prefixField(fmt.Sprintf("rules[%d]", i), err)
		}
	})
	if err != nil {
		return 0, false, err
	}
	if !isArray {
		return 0, false, badRequest("", "expected a JSON array of rules (send [] to delete every rule)")
	}
	if err := s.policyExists(r, pid); err != nil {
		return 0, false, err
	}
	if invalid != nil {
		return 0, false, invalid
	}
	if err := s.checkDirectories(r, &callpolicy.PolicyConfig{Rules: rules}, true); err != nil {
		return 0, false, err
	}
	if err := s.checkGroupRefs(r, rules, true); err != nil {
		return 0, false, err
	}
	var stored func(ok bool)
	var idsSet func()
	if live := s.cfg.Live; live != nil {
		idsSet = func() { stored = live.Replacing(pid, rules) }
	}
	err = s.store.ReplaceRules(r.Context(), pid, rules, idsSet)
	if stored != nil {
		stored(err == nil)
	}
	return len(rules), stored != nil, err
}

func (s *server) getRule(w http.ResponseWriter, r *http.Request) {
	id, err := ruleID(r)
	if err == nil {
		var rule callpolicy.Rule
		rule, err = s.store.GetRule(r.Context(), id)
		if err == nil {
			writeJSON(w, http.StatusOK, rule)
			return
		}
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("rule %d not found", id)
		}
	}
	s.fail(w, r, err)
}

func (s *server) updateRule(w http.ResponseWriter, r *http.Request) {
	id, err := ruleID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var in ruleInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.ID != 0 && in.ID != id {
		s.fail(w, r, badRequest("id", "id: %d in the body differs from %d in the path", in.ID, id))
		return
	}
	old, err := s.store.GetRule(r.Context(), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("rule %d not found", id)
		}
		s.fail(w, r, err)
		return
	}
	if err := in.checkPolicyID("policy_id", old.PolicyID); err != nil {
		s.fail(w, r, err)
		return
	}
	rule := in.rule(old.PolicyID)
	rule.ID = id
	rule.CreatedAt = old.CreatedAt
	rule.Hits = old.Hits
	rule.LastHitAt = old.LastHitAt
	if err := s.checkRule(r, &rule); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.UpdateRule(r.Context(), &rule); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditRules, "update rule", strconv.FormatInt(id, 10))
	if stored, err := s.store.GetRule(r.Context(), id); err == nil {
		rule = stored
	}
	writeJSON(w, http.StatusOK, rule)
}

func (s *server) deleteRule(w http.ResponseWriter, r *http.Request) {
	id, err := ruleID(r)
	if err == nil {
		err = s.store.DeleteRule(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("rule %d not found", id)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditRules, "delete rule", strconv.FormatInt(id, 10))
	w.WriteHeader(http.StatusNoContent)
}

// decodeBulkRules decodes a JSON array of rules one element at a time,
// handing each to each(i, in); in is reused for the next element, so each
// copies what it keeps. Decoding the whole array as one value made
// encoding/json copy the whole body into its own buffer and grow a
// []ruleInput by reflection: tens of MB of allocations in large blocks,
// whose GC assist debt stalled CURRI requests on the same process for 100+
// ms; and a []ruleInput of 100,000 rules is 31 MB held until the last one
// is converted. Any body the fast path does not take as a clean array goes
// through decodeJSONBytes, so errors read exactly as before; each may then
// see index 0 again and must start over. isArray is false (with a nil
// error) for a JSON null.
func decodeBulkRules(body []byte, each func(i int, in *ruleInput, raw []byte)) (isArray bool, err error) {
	if decodeRuleArray(body, each) {
		return true, nil
	}
	var ins []ruleInput
	if err := decodeJSONBytes(body, &ins); err != nil {
		return false, err
	}
	if ins == nil {
		return false, nil
	}
	for i := range ins {
		each(i, &ins[i], nil)
	}
	return true, nil
}

// decodeRuleArray walks the array itself, decoding each element with
// fastRule, or with encoding/json when fastRule does not take it; false as
// soon as the body is not a clean array of objects that decode.
func decodeRuleArray(body []byte, each func(i int, in *ruleInput, raw []byte)) bool {
	p := skipWS(body, 0)
	if p >= len(body) || body[p] != '[' {
		return false
	}
	p = skipWS(body, p+1)
	var in ruleInput
	if p < len(body) && body[p] == ']' {
		return skipWS(body, p+1) == len(body)
	}
	for i := 0; ; i++ {
		if i%32 == 31 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
		in = ruleInput{}
		end, ok := fastRule(body, p, &in)
		if !ok {
			in = ruleInput{}
			dec := json.NewDecoder(bytes.NewReader(body[p:]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return false
			}
			end = p + int(dec.InputOffset())
		}
		each(i, &in, body[p:end])
		p = skipWS(body, end)
		if p >= len(body) {
			return false
		}
		switch body[p] {
		case ',':
			p = skipWS(body, p+1)
		case ']':
			return skipWS(body, p+1) == len(body)
		default:
			return false
		}
	}
}

// bulkSizeHint estimates the rule count of a bulk body from its "action"
// keys (every valid rule has one), bounded by the body size so that a
// hostile body cannot make the hint much larger than the body itself.
func bulkSizeHint(body []byte) int {
	n := bytes.Count(body, []byte(`"action"`))
	return min(n, len(body)/32)
}

// checkRule validates one rule sent alone (create, update) and what it
// refers to: the directories of its action and the number groups it
// matches on.
func (s *server) checkRule(r *http.Request, rule *callpolicy.Rule) error {
	if err := callpolicy.ValidateRule(rule); err != nil {
		return err
	}
	if err := s.checkDirectories(r, &callpolicy.PolicyConfig{Rules: []callpolicy.Rule{*rule}}, false); err != nil {
		return err
	}
	return s.checkGroupRefs(r, []callpolicy.Rule{*rule}, false)
}
