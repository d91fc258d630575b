// Package store is signalbox's configuration and call-log store: one
// interface, two backends (SQLite via modernc.org/sqlite, the embedded
// default; PostgreSQL via pgx). Migrations run at Open. One contract test
// suite runs against both.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/platform/store/callseg"
)

// Errors callers test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Store is the whole persistent state of signalbox. Every write that changes
// configuration bumps the config version in the same transaction.
type Store interface {
	// Backend is "sqlite" or "postgres".
	Backend() string
	Ping(ctx context.Context) error
	Close() error

	// ConfigVersion is bumped by every configuration change.
	ConfigVersion(ctx context.Context) (int64, error)
	// Changes delivers a value after another node (or this one) changed the
	// configuration, where the backend can tell (PostgreSQL LISTEN/NOTIFY).
	// Callers also poll ConfigVersion as a fallback. Closed when ctx ends.
	Changes(ctx context.Context) <-chan struct{}

	// Policies.
	ListPolicies(ctx context.Context) ([]callpolicy.Policy, error)
	GetPolicy(ctx context.Context, id string) (callpolicy.Policy, error)
	CreatePolicy(ctx context.Context, p *callpolicy.Policy) error // ErrConflict if the id exists
	UpdatePolicy(ctx context.Context, p *callpolicy.Policy) error
	DeletePolicy(ctx context.Context, id string) error // deletes its rules and list entries too

	// Rules, ordered by priority then id.
	ListRules(ctx context.Context, policyID string) ([]callpolicy.Rule, error)
	GetRule(ctx context.Context, id int64) (callpolicy.Rule, error)
	CreateRule(ctx context.Context, r *callpolicy.Rule) error // sets ID, CreatedAt, UpdatedAt
	UpdateRule(ctx context.Context, r *callpolicy.Rule) error
	DeleteRule(ctx context.Context, id int64) error
	// ReplaceRules atomically replaces every rule of a policy (bulk import).
	// On success the rules are as stored: ID, PolicyID, CreatedAt and
	// UpdatedAt set, no hits (a failure after the ids were drawn leaves them
	// set too, to ids that were not stored). If idsSet is not nil it is called once those
	// fields are set, before the rows are written, so the caller can start
	// compiling the rules meanwhile (reading them only: ReplaceRules reads
	// them too until it returns); whether they were stored is ReplaceRules'
	// error.
	ReplaceRules(ctx context.Context, policyID string, rules []callpolicy.Rule, idsSet func()) error
	// ChangeRules is an incremental replacement: it deletes removed and
	// inserts added (ids set before the rows are written; idsSet as in
	// ReplaceRules), refused with ErrConflict if the config version is not
	// expect or a removed rule is not the policy's.
	ChangeRules(ctx context.Context, policyID string, expect int64, removed []int64, added []callpolicy.Rule, idsSet func()) error
	// AddRuleHits adds hit counts and last-hit times (not a config change).
	AddRuleHits(ctx context.Context, hits map[int64]RuleHit) error

	// Allow and block lists.
	ListEntries(ctx context.Context, policyID string, list callpolicy.ListKind) ([]callpolicy.ListEntry, error)
	// AddEntries inserts all entries or none; sets their IDs.
	AddEntries(ctx context.Context, policyID string, list callpolicy.ListKind, entries []callpolicy.ListEntry) error
	DeleteEntry(ctx context.Context, policyID string, list callpolicy.ListKind, id int64) error

	// Caller-name directories. Each carries the config version of its last
	// change, so that a reload reads only the directories that changed.
	ListDirectories(ctx context.Context) ([]directory.Directory, error)
	GetDirectory(ctx context.Context, id string) (directory.Directory, error)
	CreateDirectory(ctx context.Context, d *directory.Directory) error // ErrConflict if the id exists
	UpdateDirectory(ctx context.Context, d *directory.Directory) error // name, description, fallback
	// DeleteDirectory deletes it with its entries; ErrInUse when a policy
	// or rule reads it.
	DeleteDirectory(ctx context.Context, id string) error
	SearchDirectoryEntries(ctx context.Context, id string, q DirectoryQuery) ([]directory.Entry, error)
	// ScanDirectoryEntries streams every entry from one read snapshot and
	// returns the directory as of it.
	ScanDirectoryEntries(ctx context.Context, id string, fn func(number, name string, prefix bool) error) (directory.Directory, error)
	// PutDirectoryEntries adds entries or renames existing ones;
	// ReplaceDirectoryEntries makes entries the whole directory, writing
	// only the difference; DeleteDirectoryEntries deletes by key (all or
	// none). Entries are clean and unique by key.
	PutDirectoryEntries(ctx context.Context, id string, entries []directory.Entry) (DirectoryChange, error)
	ReplaceDirectoryEntries(ctx context.Context, id string, entries []directory.Entry) (DirectoryChange, error)
	DeleteDirectoryEntries(ctx context.Context, id string, keys []directory.Key) (DirectoryChange, error)

	// Shared lists (block and allow lists several policies use) and number
	// groups; like directories, each carries the config version of its
	// last change.
	ListSharedLists(ctx context.Context) ([]callpolicy.SharedList, error)
	GetSharedList(ctx context.Context, id string) (callpolicy.SharedList, error)
	CreateSharedList(ctx context.Context, l *callpolicy.SharedList) error // ErrConflict if the id exists
	UpdateSharedList(ctx context.Context, l *callpolicy.SharedList) error // ErrConflict if the kind differs
	// DeleteSharedList deletes it with its entries; ErrInUse when it is a
	// group a rule or another group names.
	DeleteSharedList(ctx context.Context, id string) error
	ListSharedEntries(ctx context.Context, id string) ([]callpolicy.ListEntry, error)
	// LoadSharedList reads a list and its entries from one read snapshot.
	LoadSharedList(ctx context.Context, id string) (callpolicy.SharedListConfig, error)
	AddSharedEntries(ctx context.Context, id string, entries []callpolicy.ListEntry) error // all or none; sets IDs
	DeleteSharedEntry(ctx context.Context, id string, entryID int64) error

	// Cluster-wide rate limits: SyncRateCounts writes this node's counts
	// and returns the sum of the other nodes' for the keys they changed
	// since; PruneRateCounts drops expired ones.
	SyncRateCounts(ctx context.Context, node string, push []callpolicy.LimitCount, since, now time.Time) ([]callpolicy.LimitCount, error)
	PruneRateCounts(ctx context.Context, before time.Time) (int64, error)

	// LoadPolicies returns every policy with its rules and lists, for compiling.
	LoadPolicies(ctx context.Context) ([]callpolicy.PolicyConfig, error)

	// Call log.
	InsertCalls(ctx context.Context, calls []CallRecord) error
	SearchCalls(ctx context.Context, q CallQuery) ([]CallRecord, error)
	// PruneCalls deletes records older than before, then the oldest beyond maxRows.
	PruneCalls(ctx context.Context, before time.Time, maxRows int64) (int64, error)

	// Director feeds, stored as validated JSON specs keyed by name.
	ListFeeds(ctx context.Context) ([]FeedRecord, error)
	GetFeed(ctx context.Context, name string) (FeedRecord, error)
	CreateFeed(ctx context.Context, f *FeedRecord) error // ErrConflict if the name exists
	UpdateFeed(ctx context.Context, f *FeedRecord) error
	DeleteFeed(ctx context.Context, name string) error

	// Webhooks, by name.
	ListWebhooks(ctx context.Context) ([]WebhookRecord, error)
	GetWebhook(ctx context.Context, name string) (WebhookRecord, error)
	CreateWebhook(ctx context.Context, w *WebhookRecord) error // ErrConflict if the name exists
	UpdateWebhook(ctx context.Context, w *WebhookRecord) error
	DeleteWebhook(ctx context.Context, name string) error

	// Subscriber traces, by id.
	ListTraces(ctx context.Context) ([]TraceRecord, error)
	GetTrace(ctx context.Context, id string) (TraceRecord, error)
	CreateTrace(ctx context.Context, t *TraceRecord) error
	UpdateTrace(ctx context.Context, t *TraceRecord) error
	DeleteTrace(ctx context.Context, id string) error

	// The audit log: every change made through the API, append-only.
	AppendAudit(ctx context.Context, a *AuditRecord) error
	SearchAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	PruneAudit(ctx context.Context, before time.Time) (int64, error)

	// API tokens (secrets are stored only as SHA-256 hashes).
	ListTokens(ctx context.Context) ([]Token, error)
	CreateToken(ctx context.Context, t *Token) error
	DeleteToken(ctx context.Context, id string) error
	TokenByHash(ctx context.Context, hash string) (Token, error)

	// Console sign-in sessions (secrets stored only as SHA-256 hashes);
	// SessionByHash finds only sessions that have not expired at at.
	CreateSession(ctx context.Context, s *Session) error
	SessionByHash(ctx context.Context, hash string, at time.Time) (Session, error)
	DeleteSession(ctx context.Context, hash string) error
}

// RuleHit is a batch of hits for one rule.
type RuleHit struct {
	Count int64
	Last  time.Time
}

// CallRecord is one logged CURRI decision (defined with its storage
// encoding in callseg).
type CallRecord = callseg.Record

// CallQuery filters the call log; zero fields do not filter. Newest first.
type CallQuery struct {
	Number   string // matches any of the four number fields
	Decision string
	Policy   string
	Since    time.Time
	Until    time.Time
	Limit    int // default 100, max 10000
}

// SpecRecord is a named JSON spec as stored: a director feed, a webhook.
type SpecRecord struct {
	Name      string          `json:"name"`
	Spec      json.RawMessage `json:"spec"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// FeedRecord is a stored director feed (director.FeedSpec).
type FeedRecord = SpecRecord

// WebhookRecord is a stored webhook (webhook.Spec).
type WebhookRecord = SpecRecord

// TraceRecord is a stored subscriber trace (trace.Trace).
type TraceRecord = SpecRecord

// Token is an API token. Hash is hex SHA-256 of the secret.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"` // admin | viewer
	Hash      string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}
