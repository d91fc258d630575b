package api

import (
	"net/http"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// evaluateResponse is what a dry run answers.
type evaluateResponse struct {
	Policy   string              `json:"policy"`
	Call     callpolicy.Call     `json:"call"`
	Decision callpolicy.Decision `json:"decision"`
}

// evaluate runs a call through the live compiled policy without side
// effects: no rate-limit counting, no hit counts, no call log.
func (s *server) evaluate(w http.ResponseWriter, r *http.Request) {
	pid := r.PathValue("id")
	var call callpolicy.Call
	if err := decodeJSON(w, r, maxBodyBytes, &call); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.cfg.Policies == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "the call policy engine is not running"})
		return
	}
	if err := s.policyExists(r, pid); err != nil {
		s.fail(w, r, err)
		return
	}
	d, ok := s.cfg.Policies.DryRun(pid, &call, s.now())
	if !ok {
		// Stored but not (yet) compiled: the engine rebuilds after a change.
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "policy \"" + pid + "\" is not loaded in the engine yet; retry shortly"})
		return
	}
	writeJSON(w, http.StatusOK, evaluateResponse{Policy: pid, Call: call, Decision: d})
}
