package callpolicy

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/callcontrol/match"
)

// Field specs of the six rule match fields, in Call order.
var ruleFieldNames = [6]string{"calling", "called", "transformed_calling", "transformed_called", "trigger_point", "device_name"}

func ruleFields() []match.FieldSpec {
	return []match.FieldSpec{
		{Name: "calling", Empty: Anonymous},
		{Name: "called"},
		{Name: "transformed_calling", Empty: Anonymous},
		{Name: "transformed_called"},
		{Name: "trigger_point", Text: true, FoldCase: true},
		{Name: "device_name", Text: true},
	}
}

func listFields() []match.FieldSpec {
	return []match.FieldSpec{{Name: "calling", NoRegex: true, Empty: Anonymous}, {Name: "called", NoRegex: true}}
}

func (m *Match) values() [6]string {
	return [6]string{m.Calling, m.Called, m.TransformedCalling, m.TransformedCalled, m.TriggerPoint, m.DeviceName}
}

// Reasons CUCM accepts in a CIXML reason (Cisco's list).
var validReasons = map[string]bool{
	"unknown": true, "user-busy": true, "no-answer": true, "unavailable": true, "unconditional": true,
	"time-of-day": true, "do-not-disturb": true, "deflection": true, "follow-me": true,
	"out-of-service": true, "away": true, "blocked": true, "chaperone": true,
}

var (
	reDialNumber = regexp.MustCompile(`^[+]?[0-9A-D*#]{1,48}$`)
	reIdentifier = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	rePolicyID   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	reHHMM       = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
)

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

const maxNameLen = 64

// parseField checks v as a condition of field spec.
func parseField(spec match.FieldSpec, v string) error {
	_, err := match.Parse(spec, v)
	return err
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ValidateRule checks a rule's match, action, schedule and expiry.
func ValidateRule(r *Rule) error {
	if r == nil {
		return fieldErr("rule", "missing")
	}
	vals := r.Match.values()
	for f, spec := range ruleFields() {
		if id, ok := strings.CutPrefix(vals[f], GroupPrefix); ok {
			if !rePolicyID.MatchString(id) {
				return &FieldError{Field: "match." + ruleFieldNames[f], Msg: fmt.Sprintf("%q is not a group id", id)}
			}
			continue
		}
		if _, err := match.Parse(spec, vals[f]); err != nil {
			return &FieldError{Field: "match." + ruleFieldNames[f], Msg: err.Error()}
		}
	}
	if err := validateAction("action.", &r.Action); err != nil {
		return err
	}
	if r.Match.Neighbourhood != nil {
		if _, err := compileNeighbourhood(r.Match.Neighbourhood); err != nil {
			return err
		}
	}
	if r.Schedule != nil {
		if _, err := compileSchedule(r.Schedule, nil); err != nil {
			return err
		}
	}
	if r.ExpiresAt != nil && r.ExpiresAt.IsZero() {
		return fieldErr("expires_at", "zero time; omit it for no expiry")
	}
	if len(r.Description) > 1024 {
		return fieldErr("description", "longer than 1024 bytes")
	}
	return nil
}

// ValidatePolicyID checks a policy id: the slug used in /curri/{id}.
func ValidatePolicyID(id string) error {
	if !rePolicyID.MatchString(id) {
		return fmt.Errorf("%q is not a slug (a-z 0-9 _ -, starting with a letter or digit, at most 64)", id)
	}
	return nil
}

// ValidatePolicy checks a policy's id, default action and rate limit.
func ValidatePolicy(p *Policy) error {
	if p == nil {
		return fieldErr("policy", "missing")
	}
	if err := ValidatePolicyID(p.ID); err != nil {
		return &FieldError{Field: "id", Msg: err.Error()}
	}
	if len(p.Name) > 256 {
		return fieldErr("name", "longer than 256 bytes")
	}
	if err := validateAction("default_action.", &p.DefaultAction); err != nil {
		return err
	}
	for _, la := range []struct {
		name string
		a    *Action
	}{{"allow_action.", p.AllowAction}, {"block_action.", p.BlockAction}} {
		if la.a != nil {
			if err := validateAction(la.name, la.a); err != nil {
				return err
			}
		}
	}
	if rl := p.RateLimit; rl != nil {
		if rl.PerCalling == nil && rl.Overall == nil && rl.PerCalled == nil {
			return fieldErr("rate_limit", "needs per_calling, per_called or overall")
		}
		for _, nl := range []struct {
			name string
			l    *Limit
		}{{"per_calling", rl.PerCalling}, {"per_called", rl.PerCalled}, {"overall", rl.Overall}} {
			name, l := nl.name, nl.l
			if l == nil {
				continue
			}
			if l.Calls < 1 || l.Calls > 1_000_000 {
				return fieldErr("rate_limit."+name+".calls", "%d out of range 1..1000000", l.Calls)
			}
			if l.WindowSeconds < 1 || l.WindowSeconds > 86400 {
				return fieldErr("rate_limit."+name+".window_seconds", "%d out of range 1..86400", l.WindowSeconds)
			}
			if l.BlockSeconds < 0 || l.BlockSeconds > 7*86400 {
				return fieldErr("rate_limit."+name+".block_seconds", "%d out of range 0..604800 (0 = the rate limit's)", l.BlockSeconds)
			}
			if l.Action != nil {
				if err := validateAction("rate_limit."+name+".action.", l.Action); err != nil {
					return err
				}
			}
		}
		if rl.BlockSeconds < 0 || rl.BlockSeconds > 7*86400 {
			return fieldErr("rate_limit.block_seconds", "%d out of range 0..604800 (0 = the window)", rl.BlockSeconds)
		}
		if rl.Action != nil {
			if err := validateAction("rate_limit.action.", rl.Action); err != nil {
				return err
			}
		}
	}
	if r := p.Reputation; r != nil {
		if err := validateReputation(r); err != nil {
			return err
		}
	}
	return nil
}

// validateReputation checks a policy's reputation settings.
func validateReputation(r *Reputation) error {
	u, err := url.Parse(r.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fieldErr("reputation.url", "%q: want an http:// or https:// URL", r.URL)
	case !strings.Contains(r.URL, "{number}"):
		return fieldErr("reputation.url", "%q has no {number} for the calling number", r.URL)
	case r.BudgetMs < 0 || r.BudgetMs > MaxReputationBudgetMs:
		return fieldErr("reputation.budget_ms", "%d out of range 1..%d (0 = %d; CUCM waits 50 ms for the whole answer)", r.BudgetMs, MaxReputationBudgetMs, DefaultReputationBudgetMs)
	case r.CacheTTLSeconds < 0 || r.CacheTTLSeconds > 7*86400:
		return fieldErr("reputation.cache_ttl_seconds", "%d out of range 1..604800 (0 = %d)", r.CacheTTLSeconds, DefaultReputationTTL)
	case r.CacheSize < 0 || r.CacheSize > 10_000_000:
		return fieldErr("reputation.cache_size", "%d out of range 1..10000000 (0 = %d)", r.CacheSize, DefaultReputationCache)
	case r.Failure != "" && r.Failure != "open" && r.Failure != "closed":
		return fieldErr("reputation.failure", "%q: want open or closed", r.Failure)
	case r.FailureAction != nil && r.Failure != "closed":
		return fieldErr("reputation.failure_action", "applies only with \"failure\":\"closed\"")
	case len(r.Actions) > 32:
		return fieldErr("reputation.actions", "%d actions; at most 32", len(r.Actions))
	}
	for _, f := range []struct{ name, v string }{{"score_field", r.ScoreField}, {"labels_field", r.LabelsField}} {
		if len(f.v) > 128 || strings.HasPrefix(f.v, ".") || strings.HasSuffix(f.v, ".") || strings.Contains(f.v, "..") {
			return fieldErr("reputation."+f.name, "%q: want a dotted path such as result.score", f.v)
		}
	}
	if r.FailureAction != nil {
		if err := validateAction("reputation.failure_action.", r.FailureAction); err != nil {
			return err
		}
	}
	for i := range r.Actions {
		a := &r.Actions[i]
		name := fmt.Sprintf("reputation.actions[%d]", i)
		if a.MinScore == nil && a.Label == "" {
			return fieldErr(name, "needs min_score, label or both")
		}
		if err := validateAction(name+".action.", &a.Action); err != nil {
			return err
		}
	}
	return nil
}

// ValidateEntry checks an allow/block list entry.
func ValidateEntry(e *ListEntry) error {
	if e == nil {
		return fieldErr("entry", "missing")
	}
	if e.List != "" && e.List != AllowList && e.List != BlockList {
		return fieldErr("list", "%q is not allow or block", e.List)
	}
	if e.Calling == "" {
		return fieldErr("calling", "required")
	}
	specs := listFields()
	if _, err := match.Parse(specs[0], e.Calling); err != nil {
		return fieldErr("calling", "%s", err.Error())
	}
	if _, err := match.Parse(specs[1], e.Called); err != nil {
		return fieldErr("called", "%s", err.Error())
	}
	if e.ExpiresAt != nil && e.ExpiresAt.IsZero() {
		return fieldErr("expires_at", "zero time; omit it for no expiry")
	}
	if len(e.Note) > 1024 {
		return fieldErr("note", "longer than 1024 bytes")
	}
	if e.Action != nil {
		if err := validateAction("action.", e.Action); err != nil {
			return err
		}
	}
	return nil
}

func validateAction(prefix string, a *Action) error {
	switch a.Decision {
	case Permit, Deny, Divert:
	case "":
		return fieldErr(prefix+"decision", "required (permit, deny or divert)")
	default:
		return fieldErr(prefix+"decision", "%q is not permit, deny or divert", a.Decision)
	}
	if a.Decision == Divert {
		if a.Destination == "" {
			return fieldErr(prefix+"destination", "required for divert")
		}
		if a.Destination != "voiceMail" && !reDialNumber.MatchString(a.Destination) {
			return fieldErr(prefix+"destination", "%q is not a number ([+]0-9A-D*#, 1-48) or voiceMail", a.Destination)
		}
	} else if a.Destination != "" {
		return fieldErr(prefix+"destination", "only with divert")
	}
	if a.Reason != "" && !validReasons[a.Reason] {
		return fieldErr(prefix+"reason", "%q is not one of unknown, user-busy, no-answer, unavailable, unconditional, time-of-day, do-not-disturb, deflection, follow-me, out-of-service, away, blocked, chaperone", a.Reason)
	}
	switch a.ResetCallHistory {
	case "", "resetLastHop", "resetAllHops":
	default:
		return fieldErr(prefix+"reset_call_history", "%q is not resetLastHop or resetAllHops", a.ResetCallHistory)
	}
	if a.Greeting != "" {
		if a.Decision != Permit {
			return fieldErr(prefix+"greeting", "only with permit")
		}
		if !reIdentifier.MatchString(a.Greeting) {
			return fieldErr(prefix+"greeting", "%q is not an identifier (A-Z a-z 0-9 _ -, 1-64)", a.Greeting)
		}
	}
	if a.Announce != "" {
		if a.Decision != Deny {
			return fieldErr(prefix+"announce", "only with deny")
		}
		if !reIdentifier.MatchString(a.Announce) {
			return fieldErr(prefix+"announce", "%q is not an identifier (A-Z a-z 0-9 _ -, 1-64)", a.Announce)
		}
	}
	if m := a.Modify; m != nil {
		if a.Decision == Deny {
			return fieldErr(prefix+"modify", "only with permit or divert")
		}
		for _, nv := range [][2]string{{"calling_number", m.CallingNumber}, {"called_number", m.CalledNumber}} {
			name, v := nv[0], nv[1]
			if v != "" && !reDialNumber.MatchString(v) {
				return fieldErr(prefix+"modify."+name, "%q is not a number ([+]0-9A-D*#, 1-48)", v)
			}
		}
		if id, ok := strings.CutPrefix(m.CallingName, directory.RefPrefix); ok {
			if err := directory.ValidateID(id); err != nil {
				return fieldErr(prefix+"modify.calling_name", "%s", err)
			}
		}
		if strings.HasPrefix(m.CalledName, directory.RefPrefix) {
			return fieldErr(prefix+"modify.called_name", "a directory names the caller only: use calling_name")
		}
		for _, nv := range [][2]string{{"calling_name", m.CallingName}, {"called_name", m.CalledName}} {
			name, v := nv[0], nv[1]
			if len(v) > maxNameLen {
				return fieldErr(prefix+"modify."+name, "longer than %d bytes", maxNameLen)
			}
			for _, c := range v {
				if c < 0x20 || c == 0x7f {
					return fieldErr(prefix+"modify."+name, "control character %U", c)
				}
			}
		}
		if *m == (Modify{}) {
			return fieldErr(prefix+"modify", "empty; omit it or set a number or name")
		}
	}
	return nil
}
