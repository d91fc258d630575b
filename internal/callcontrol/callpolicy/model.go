// Package callpolicy turns a call's attributes into a Decision from ordered
// rules, allow/block lists and rate limits. It knows nothing of HTTP or XML:
// the CURRI protocol lives in internal/callcontrol/curri, storage in internal/store.
package callpolicy

import (
	"strconv"
	"time"
)

// Decision kinds an Action can carry.
const (
	Permit = "permit"
	Deny   = "deny"
	Divert = "divert"
)

// Step names the evaluation step that decided a call.
type Step string

const (
	StepAllowList Step = "allow_list"
	StepBlockList Step = "block_list"
	StepRateLimit Step = "rate_limit"
	// StepReputation: the reputation service's answer (or its absence,
	// failing closed) decided.
	StepReputation Step = "reputation"
	StepRule       Step = "rule"
	StepDefault    Step = "default"
)

// ListKind is "allow" or "block" (a policy's lists and shared lists), or
// "group" (a shared list of numbers rules match with "group:<id>").
type ListKind string

const (
	AllowList ListKind = "allow"
	BlockList ListKind = "block"
	GroupList ListKind = "group"
)

// GroupPrefix starts a rule match value naming a number group: a rule with
// "calling": "group:vip" matches a calling number that any entry of the
// shared list vip (kind group) matches.
const GroupPrefix = "group:"

// SharedList is a list several policies use. A block or allow list is
// checked by every policy in Policies (every policy when empty) after the
// policy's own list of that kind, before rate limits and rules; a hit
// answers with the entry's action, else the shared list's Action, else the
// policy's list action. A group is a named set of numbers, prefixes and
// patterns (its entries' calling values; a value "group:<id>" includes
// another group) that rules match with "group:<id>".
type SharedList struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Kind        ListKind `json:"kind"`
	Policies    []string `json:"policies,omitempty"`
	Action      *Action  `json:"action,omitempty"`
	// Entries counts the list's entries (read-only).
	Entries   int64     `json:"entries"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SharedListConfig is a shared list with its entries, for compiling.
type SharedListConfig struct {
	List    SharedList
	Entries []ListEntry
}

// DefaultPolicyID is the policy that exists from the first start and that
// `POST /curri` (no policy in the path) is evaluated against.
const DefaultPolicyID = "default"

// Anonymous is the match value (in calling and transformed_calling, and a
// list entry's calling) that holds for a caller who presented no number.
const Anonymous = "anonymous"

// Call holds the six attributes CUCM sends for a call (empty when absent).
type Call struct {
	Calling            string `json:"calling"`
	Called             string `json:"called"`
	TransformedCalling string `json:"transformed_calling"`
	TransformedCalled  string `json:"transformed_called"`
	TriggerPoint       string `json:"trigger_point"`
	DeviceName         string `json:"device_name"`
}

// Anonymous reports whether the caller presented no number in either form
// (a withheld or restricted caller ID).
func (c *Call) Anonymous() bool { return c.Calling == "" && c.TransformedCalling == "" }

// Policy is a named set of rules, lists and limits. Its ID is a slug used in
// the CURRI URL (/curri/{id}).
type Policy struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Description   string     `json:"description,omitempty"`
	DefaultAction Action     `json:"default_action"`
	RateLimit     *RateLimit `json:"rate_limit,omitempty"`
	// AllowAction and BlockAction are what an allow-list or block-list hit
	// tells CUCM (an entry's own Action wins over them). Unset: continue
	// for the allow list, reject with reason "blocked" for the block list.
	AllowAction *Action `json:"allow_action,omitempty"`
	BlockAction *Action `json:"block_action,omitempty"`
	// Reputation, if set, has the policy ask an external reputation
	// service about the calling number after its lists and rate limits
	// and before its rules.
	Reputation *Reputation `json:"reputation,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
}

// Reputation is how a policy consults a reputation service: an HTTP GET
// of URL, with {number} replaced by the calling number (transformed when
// CUCM sends one), answered with JSON holding a score and optional labels.
// Answers are cached. A call never waits for the service past BudgetMs: a
// service slower than that, failing or down leaves the call to the rules
// (Failure "open") or gives it FailureAction (Failure "closed"). Otherwise
// the first of Actions the answer meets decides the call; none: the rules.
type Reputation struct {
	URL             string             `json:"url"`
	ScoreField      string             `json:"score_field,omitempty"`       // dotted path; default "score"
	LabelsField     string             `json:"labels_field,omitempty"`      // dotted path; default "labels"
	BudgetMs        int                `json:"budget_ms,omitempty"`         // default 20
	CacheTTLSeconds int                `json:"cache_ttl_seconds,omitempty"` // default 3600
	CacheSize       int                `json:"cache_size,omitempty"`        // numbers cached; default 100000
	Failure         string             `json:"failure,omitempty"`           // open (default) | closed
	FailureAction   *Action            `json:"failure_action,omitempty"`    // closed: default reject reason=unavailable
	Actions         []ReputationAction `json:"actions"`
}

// ReputationAction is what a reputation answer with at least MinScore (if
// set) and the label Label (if set) does to the call.
type ReputationAction struct {
	MinScore *float64 `json:"min_score,omitempty"`
	Label    string   `json:"label,omitempty"`
	Action   Action   `json:"action"`
}

// Reputation defaults.
const (
	DefaultReputationBudgetMs = 20
	MaxReputationBudgetMs     = 45 // CUCM gives up on the server at 50 ms
	DefaultReputationTTL      = 3600
	DefaultReputationCache    = 100_000
)

// ReputationResult is a reputation service's answer about a number, or
// why there is none.
type ReputationResult struct {
	Found  bool // false: no answer within the budget (Err says why)
	Score  float64
	Labels []string
	Cached bool   // answered from the cache
	Err    string // why not Found: "no answer within 20 ms", "HTTP 500", ...
}

// Reputer looks numbers up for the policies that have a Reputation; the
// app sets it (internal/callcontrol/reputation). Lookup returns within budget. live is
// false for dry runs, which are not counted.
type Reputer interface {
	Lookup(policy string, r *Reputation, number string, budget time.Duration, live bool) ReputationResult
}

// RateLimit protects against toll fraud and TDoS: at most Calls calls in
// WindowSeconds per calling number, per called number (one DID flooded
// from rotating callers) and per policy. A number is counted under its
// transformed (globalized) form when CUCM sends one, else as sent, so both
// forms of one number share a count; callers who presented no number share
// one count. Limits are checked overall, per called, then per calling
// number. When one is exceeded, its Action (else the RateLimit's, else
// deny) applies for its BlockSeconds (else the RateLimit's, else the
// window).
type RateLimit struct {
	PerCalling   *Limit  `json:"per_calling,omitempty"`
	PerCalled    *Limit  `json:"per_called,omitempty"`
	Overall      *Limit  `json:"overall,omitempty"`
	BlockSeconds int     `json:"block_seconds,omitempty"`
	Action       *Action `json:"action,omitempty"`
}

// Limit is N calls in a window of W seconds, with an optional action and
// block time of its own.
type Limit struct {
	Calls         int     `json:"calls"`
	WindowSeconds int     `json:"window_seconds"`
	BlockSeconds  int     `json:"block_seconds,omitempty"`
	Action        *Action `json:"action,omitempty"`
}

// Rule is one ordered entry of a policy. All given Match conditions must
// hold; an empty Match matches every call. Lower Priority is evaluated first.
type Rule struct {
	ID          int64      `json:"id"`
	PolicyID    string     `json:"policy_id"`
	Priority    int        `json:"priority"`
	Enabled     bool       `json:"enabled"`
	Match       Match      `json:"match"`
	Action      Action     `json:"action"`
	Schedule    *Schedule  `json:"schedule,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Description string     `json:"description,omitempty"`
	Tags        []string   `json:"tags,omitempty"`
	Hits        int64      `json:"hits"`
	LastHitAt   *time.Time `json:"last_hit_at,omitempty"`
	// SrcHash is the hash of the JSON the rule was last sent in by a bulk
	// replacement (0: none): a replacement that sends the same bytes keeps
	// the rule, its id and its hits, and compiles only what changed.
	SrcHash   uint64    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Match values: bare digits (optional leading +, also * # A-D) = exact;
// "prefix:DIGITS"; "pattern:" CUCM route-pattern wildcards; "regex:" RE2,
// anchored by the author; "anonymous" (calling, transformed_calling) = no
// number presented in that field. Empty = any.
type Match struct {
	Calling            string `json:"calling,omitempty"`
	Called             string `json:"called,omitempty"`
	TransformedCalling string `json:"transformed_calling,omitempty"`
	TransformedCalled  string `json:"transformed_called,omitempty"`
	TriggerPoint       string `json:"trigger_point,omitempty"`
	DeviceName         string `json:"device_name,omitempty"`
	// Neighbourhood also requires a caller ID that looks local to the
	// called number without being it (neighbourhood spoofing).
	Neighbourhood *Neighbourhood `json:"neighbourhood,omitempty"`
}

// Action is what CUCM is told to do.
type Action struct {
	Decision         string  `json:"decision"`
	Greeting         string  `json:"greeting,omitempty"`
	Modify           *Modify `json:"modify,omitempty"`
	Announce         string  `json:"announce,omitempty"`
	Reason           string  `json:"reason,omitempty"`
	Destination      string  `json:"destination,omitempty"`
	ResetCallHistory string  `json:"reset_call_history,omitempty"` // resetLastHop | resetAllHops
}

// Modify rewrites numbers or names of a continued or diverted call.
type Modify struct {
	CallingNumber string `json:"calling_number,omitempty"`
	CalledNumber  string `json:"called_number,omitempty"`
	CallingName   string `json:"calling_name,omitempty"`
	CalledName    string `json:"called_name,omitempty"`
}

// Schedule restricts a rule to days of week and a time of day window in a
// time zone. From > To spans midnight.
type Schedule struct {
	Days     []string `json:"days,omitempty"` // mon tue wed thu fri sat sun; empty = every day
	From     string   `json:"from,omitempty"` // HH:MM
	To       string   `json:"to,omitempty"`   // HH:MM
	TimeZone string   `json:"time_zone,omitempty"`
}

// ListEntry is an allow or block list entry. Calling is required; Called is
// optional (both must match when set). Values are exact, prefix: or pattern:;
// Calling "anonymous" matches callers who presented no number. A number
// matches in either form CUCM sends it: calling or transformed_calling
// (usually the globalized +E.164 form), called or transformed_called.
type ListEntry struct {
	ID        int64      `json:"id"`
	PolicyID  string     `json:"policy_id,omitempty"`
	ListID    string     `json:"list_id,omitempty"` // a shared list's entry: its list`
	List      ListKind   `json:"list,omitempty"`
	Calling   string     `json:"calling"`
	Called    string     `json:"called,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Note      string     `json:"note,omitempty"`
	// Action, when set, is what a hit on this entry tells CUCM instead of
	// the list's action (Policy.AllowAction, BlockAction).
	Action    *Action   `json:"action,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// PolicyConfig is everything needed to compile one policy.
type PolicyConfig struct {
	Policy Policy
	Rules  []Rule
	Allow  []ListEntry
	Block  []ListEntry
}

// Decision is the outcome of evaluating a call, and why.
type Decision struct {
	Policy  string `json:"policy"`
	Action  Action `json:"action"`
	Step    Step   `json:"step"`
	RuleID  int64  `json:"rule_id,omitempty"`
	EntryID int64  `json:"entry_id,omitempty"`
	// Form names the number fields a list entry or per-caller rate limit
	// matched on: "calling" or "transformed_calling", joined by "+" to
	// "called" or "transformed_called" for an entry with a called number.
	Form   string `json:"matched_form,omitempty"`
	Reason string `json:"explanation,omitempty"`
	// Name says how a calling name of "directory:<id>" was found (dry
	// runs only): `name "Acme Corp" from directory corp, prefix +1972555
	// (transformed_calling)`.
	Name string `json:"name_lookup,omitempty"`
	// Reputation says what the reputation service answered about the
	// caller and whether from the cache (dry runs only).
	Reputation string `json:"reputation,omitempty"`
}

// FieldError is a validation error naming the offending field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Sent says in short what CUCM is told for a: "continue", "continue modify
// calling_name=\"Alice\" greeting=in_meeting", "divert 12378
// reason=chaperone", "reject announce=user_unavailable reason=blocked". The
// call log keeps it, to answer "what did we tell CUCM for this call?".
func (a *Action) Sent() string {
	switch {
	case a.Decision == Permit && a.Modify == nil && a.Greeting == "":
		return "continue"
	case a.Decision == Deny && a.Announce == "" && a.Greeting == "" && a.Reason == "":
		return "reject"
	case a.Decision == Deny && a.Announce == "" && a.Greeting == "" && a.Reason == "blocked":
		return "reject reason=blocked"
	}
	b := make([]byte, 0, 64)
	switch a.Decision {
	case Permit:
		b = append(b, "continue"...)
	case Divert:
		b = append(b, "divert "...)
		b = append(b, a.Destination...)
	case Deny:
		b = append(b, "reject"...)
	default:
		b = append(b, a.Decision...)
	}
	if m := a.Modify; m != nil && a.Decision != Deny {
		b = append(b, " modify"...)
		for _, kv := range [4][2]string{{"calling_number", m.CallingNumber}, {"called_number", m.CalledNumber},
			{"calling_name", m.CallingName}, {"called_name", m.CalledName}} {
			if kv[1] == "" {
				continue
			}
			b = append(b, ' ')
			b = append(b, kv[0]...)
			b = append(b, '=')
			if kv[0] == "calling_name" || kv[0] == "called_name" {
				b = strconv.AppendQuote(b, kv[1])
			} else {
				b = append(b, kv[1]...)
			}
		}
	}
	switch a.Decision {
	case Permit:
		if a.Greeting != "" {
			b = append(b, " greeting="...)
			b = append(b, a.Greeting...)
		}
	case Divert:
		if a.ResetCallHistory != "" {
			b = append(b, " reset_call_history="...)
			b = append(b, a.ResetCallHistory...)
		}
	case Deny:
		ann := a.Announce
		if ann == "" {
			ann = a.Greeting
		}
		if ann != "" {
			b = append(b, " announce="...)
			b = append(b, ann...)
		}
	}
	if a.Reason != "" && a.Decision != Permit {
		b = append(b, " reason="...)
		b = append(b, a.Reason...)
	}
	return string(b)
}
