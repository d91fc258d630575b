// Package livepolicy keeps the call-policy snapshot that CURRI answers from
// in step with the config store: it compiles the stored policies, swaps the
// snapshot into the callpolicy.Engine, notices changes made through the API,
// by other nodes (the store's change notifications) or missed (a periodic
// version check), fast-paths a bulk replacement of one policy's rules, and
// persists the rules' hit counts.
//
// Compiling happens off the call path; calls always read a whole snapshot
// (callpolicy.Engine.Swap).
package livepolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// Store is what the manager reads of the config store, and where it
// persists hit counts.
type Store interface {
	ConfigVersion(ctx context.Context) (int64, error)
	LoadPolicies(ctx context.Context) ([]callpolicy.PolicyConfig, error)
	GetPolicy(ctx context.Context, id string) (callpolicy.Policy, error)
	ListEntries(ctx context.Context, policyID string, list callpolicy.ListKind) ([]callpolicy.ListEntry, error)
	ListDirectories(ctx context.Context) ([]directory.Directory, error)
	GetDirectory(ctx context.Context, id string) (directory.Directory, error)
	ScanDirectoryEntries(ctx context.Context, id string, fn func(number, name string, prefix bool) error) (directory.Directory, error)
	ListSharedLists(ctx context.Context) ([]callpolicy.SharedList, error)
	LoadSharedList(ctx context.Context, id string) (callpolicy.SharedListConfig, error)
	AddRuleHits(ctx context.Context, hits map[int64]store.RuleHit) error
	Changes(ctx context.Context) <-chan struct{}
}

// Config configures a Manager. Engine and Store are required.
type Config struct {
	Engine     *callpolicy.Engine
	Store      Store
	Registerer prometheus.Registerer // may be nil
	Logger     *slog.Logger          // may be nil
	// CheckEvery is the period of the version check that catches changes
	// whose notification was missed (default 2 s); HitsEvery the period of
	// persisting hit counts (default 5 s).
	CheckEvery, HitsEvery time.Duration
}

// Manager owns the lifecycle of the live policy snapshot. Load builds the
// first one, Run keeps it current until its context ends.
type Manager struct {
	checkEvery, hitsEvery time.Duration
	engine                *callpolicy.Engine
	store                 Store
	log                   *slog.Logger
	reloads               *prometheus.CounterVec
	dirLoad               prometheus.Histogram

	reload  chan struct{}   // full rebuild requests (Changed)
	rulesCh chan *replaced  // one policy's rules replaced (Replacing)
	dirCh   chan dirChange  // one directory's entries changed (DirectoryChanged)
	listCh  chan listChange // a policy's lists or a shared list changed (ListsChanged)

	version atomic.Int64 // config version the live snapshot was built from
	// replacing counts bulk replacements between their compile's start and
	// Run applying them (or their failure): while one is on its way, a
	// version check leaves the policies to it instead of rebuilding all of
	// them a moment before it lands.
	replacing atomic.Int32
	compiles  sync.WaitGroup // compiles started by Replacing

	dirMu  sync.Mutex
	dirs   map[string]*directory.Table         // compiled directories, by id, as last loaded
	shared map[string]*callpolicy.CompiledList // compiled shared lists, by id, as last loaded
	lib    atomic.Pointer[callpolicy.Library]  // the library of the live snapshot
}

// New returns a Manager; it reads nothing until Load.
func New(cfg Config) *Manager {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 2 * time.Second
	}
	if cfg.HitsEvery <= 0 {
		cfg.HitsEvery = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		checkEvery: cfg.CheckEvery,
		hitsEvery:  cfg.HitsEvery,
		engine:     cfg.Engine,
		store:      cfg.Store,
		log:        log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_policy_reloads_total",
			Help: "Policy snapshots built: scope all (every policy loaded from the store), policy (one policy's bulk-replaced rules recompiled), policy_changes (only the rules a bulk replacement changed compiled), directory (one directory read again), directory_changes (one directory's changes applied in memory) or lists (a policy's lists or a shared list compiled alone)."},
			[]string{"scope"}),
		dirLoad: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "signalbox_policy_directory_load_seconds",
			Help:    "Time to read a changed caller-name directory from the store and compile it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
		reload:  make(chan struct{}, 1),
		rulesCh: make(chan *replaced, 1),
		dirCh:   make(chan dirChange, 1),
		listCh:  make(chan listChange, 1),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(m.reloads, m.dirLoad)
	}
	return m
}

// Version is the config version the live snapshot was built from.
func (m *Manager) Version() int64 { return m.version.Load() }

// Load builds every stored policy and makes the result live.
func (m *Manager) Load(ctx context.Context) error {
	// The version is read before the load: a change committed while loading
	// shows up as a newer version at the next check and is not missed.
	v, err := m.store.ConfigVersion(ctx)
	if err != nil {
		return fmt.Errorf("config version: %w", err)
	}
	cfgs, err := m.store.LoadPolicies(ctx)
	if err != nil {
		return fmt.Errorf("load policies: %w", err)
	}
	dirs, loaded, err := m.loadDirectories(ctx)
	if err != nil {
		return err
	}
	lists, nShared, err := m.loadShared(ctx)
	if err != nil {
		return err
	}
	loaded += nShared
	lib, err := callpolicy.NewLibrary(dirs, lists)
	if err != nil {
		return fmt.Errorf("shared lists: %w", err)
	}
	snap, err := callpolicy.CompileWith(cfgs, lib)
	if err != nil {
		return fmt.Errorf("compile policies: %w", err)
	}
	m.lib.Store(lib)
	n := loaded
	for i := range cfgs {
		n += len(cfgs[i].Rules) + len(cfgs[i].Allow) + len(cfgs[i].Block)
	}
	m.swap(ctx, snap, v, "all", n)
	return nil
}

// versioned is a compiled directory or shared list: it knows its id and
// the config version it was compiled from.
type versioned interface {
	ID() string
	Version() int64
}

// reuse returns the compiled form of each of n stored items (item i has
// id(i) and version ver(i)), taking it from cache when its version is the
// same and compiling it again with load (which also says how many entries
// it read) when not; next is the cache to keep.
func reuse[T versioned](n int, id func(i int) string, ver func(i int) int64, cache map[string]T,
	load func(i int) (T, int, error)) (out []T, next map[string]T, loaded int, err error) {
	next = make(map[string]T, n)
	out = make([]T, 0, n)
	for i := range n {
		t, ok := cache[id(i)]
		if !ok || t.Version() != ver(i) {
			var k int
			if t, k, err = load(i); err != nil {
				return nil, nil, 0, err
			}
			loaded += k
		}
		next[t.ID()] = t
		out = append(out, t)
	}
	return out, next, loaded, nil
}

// loadDirectories returns every stored directory compiled, reading the
// entries only of those whose version changed since the last load, and how
// many entries it read.
func (m *Manager) loadDirectories(ctx context.Context) ([]*directory.Table, int, error) {
	ds, err := m.store.ListDirectories(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list directories: %w", err)
	}
	m.dirMu.Lock()
	defer m.dirMu.Unlock()
	out, next, loaded, err := reuse(len(ds), func(i int) string { return ds[i].ID }, func(i int) int64 { return ds[i].Version }, m.dirs,
		func(i int) (*directory.Table, int, error) {
			start := time.Now()
			t, err := m.loadDirectory(ctx, &ds[i])
			if err != nil {
				return nil, 0, err
			}
			m.dirLoad.Observe(time.Since(start).Seconds())
			m.log.Debug("directory loaded", "directory", t.ID(), "entries", t.Len(), "version", t.Version(), "took", time.Since(start))
			return t, t.Len(), nil
		})
	if err != nil {
		return nil, 0, err
	}
	m.dirs = next
	return out, loaded, nil
}

// loadShared returns every shared list compiled, reading and compiling
// only those whose version changed since the last load, and how many
// entries it read.
func (m *Manager) loadShared(ctx context.Context) ([]*callpolicy.CompiledList, int, error) {
	ls, err := m.store.ListSharedLists(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list shared lists: %w", err)
	}
	m.dirMu.Lock()
	defer m.dirMu.Unlock()
	out, next, loaded, err := reuse(len(ls), func(i int) string { return ls[i].ID }, func(i int) int64 { return ls[i].Version }, m.shared,
		func(i int) (*callpolicy.CompiledList, int, error) {
			cfg, err := m.store.LoadSharedList(ctx, ls[i].ID)
			if err != nil {
				return nil, 0, err
			}
			c, err := callpolicy.CompileSharedList(&cfg)
			if err != nil {
				return nil, 0, err
			}
			return c, len(cfg.Entries), nil
		})
	if err != nil {
		return nil, 0, err
	}
	m.shared = next
	return out, loaded, nil
}

func (m *Manager) loadDirectory(ctx context.Context, d *directory.Directory) (*directory.Table, error) {
	b := directory.NewBuilder(d, int(d.Entries))
	got, err := m.store.ScanDirectoryEntries(ctx, d.ID, func(number, name string, prefix bool) error {
		return b.Add(number, name, prefix)
	})
	if err != nil {
		return nil, fmt.Errorf("load directory %q: %w", d.ID, err)
	}
	// The entries are of the version the scan saw, which may be newer than
	// the list's: the table says so, and the next check reloads nothing.
	b = b.WithDirectory(&got)
	t, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("compile directory %q: %w", d.ID, err)
	}
	return t, nil
}

// Changed asks Run for a full rebuild: a policy, rule or list was changed.
// It never blocks; requests pending together are served by one rebuild.
func (m *Manager) Changed() {
	select {
	case m.reload <- struct{}{}:
	default:
	}
}

// Replacing starts compiling policyID with rules while the caller stores
// them (the rules are validated and have their ids; the policy and its
// lists are read as committed now), so that the swap follows the commit
// without reading 100,000 rules back. The returned function must be
// called once: stored=true when the rules were committed, false when the
// write failed (the live snapshot then stays).
func (m *Manager) Replacing(policyID string, rules []callpolicy.Rule) (done func(stored bool)) {
	m.replacing.Add(1)
	r := &replaced{policyID: policyID, done: make(chan struct{})}
	m.compiles.Add(1)
	go func() {
		defer m.compiles.Done()
		defer close(r.done)
		r.cp, r.n, r.err = m.compilePolicy(policyID, rules)
	}()
	return func(stored bool) {
		if !stored {
			m.replacing.Add(-1)
			return
		}
		select {
		case m.rulesCh <- r: // Run counts it done
		default: // one is pending already: rebuild everything
			m.replacing.Add(-1)
			m.Changed()
		}
	}
}

// dirChange is a committed write of one directory's entries.
type dirChange struct {
	id string
	ch store.DirectoryChange
}

// DirectoryChanged tells Run that directory id's entries were written
// (committed) as ch says: the live directory is changed in place of a
// rebuild (directory.Table.With), or read again alone when the change is
// large; no policy is compiled again. It never blocks; when a change is
// pending already, everything is rebuilt.
func (m *Manager) DirectoryChanged(id string, ch store.DirectoryChange) {
	offer(m, m.dirCh, dirChange{id: id, ch: ch})
}

// offer hands v to Run through ch, or asks for a full rebuild when a
// change is pending there already. It never blocks.
func offer[T any](m *Manager, ch chan T, v T) {
	select {
	case ch <- v:
	default:
		m.Changed()
	}
}

// next reports the live snapshot and the store's config version when that
// is the live one's next (one change committed since it was built): the
// case in which a change may be applied to it alone.
func (m *Manager) next(ctx context.Context) (*callpolicy.Snapshot, int64, bool) {
	v, err := m.store.ConfigVersion(ctx)
	cur := m.engine.Snapshot()
	return cur, v, err == nil && cur != nil && v == m.version.Load()+1
}

// applyDirectory swaps in the live snapshot with the changed directory, if
// that write is the one change since the live snapshot was built;
// otherwise (false) the caller rebuilds everything.
func (m *Manager) applyDirectory(ctx context.Context, dc dirChange) bool {
	cur, v, ok := m.next(ctx)
	if !ok || dc.ch.Version != v {
		return false
	}
	old := cur.Directory(dc.id)
	if old == nil {
		return false
	}
	d := directory.Directory{ID: dc.id, Version: v, FallbackName: old.Fallback()}
	start := time.Now()
	t, ok := (*directory.Table)(nil), false
	if !dc.ch.Rewritten {
		t, ok = old.With(&d, dc.ch.Upserted, dc.ch.Deleted)
	}
	scope, n := "directory_changes", len(dc.ch.Upserted)+len(dc.ch.Deleted)
	if !ok {
		// Too much for an overlay: this directory alone is read again.
		stored, err := m.store.GetDirectory(ctx, dc.id)
		if err != nil {
			return false
		}
		if t, err = m.loadDirectory(ctx, &stored); err != nil || t.Version() != v {
			return false
		}
		scope, n = "directory", t.Len()
		m.dirLoad.Observe(time.Since(start).Seconds())
	}
	m.dirMu.Lock()
	if m.dirs != nil {
		m.dirs[dc.id] = t
	}
	m.dirMu.Unlock()
	m.swap(ctx, cur.WithDirectory(t), v, scope, n)
	m.log.Debug("directory changed", "directory", dc.id, "scope", scope, "changes", n, "took", time.Since(start))
	return true
}

// listChange is a committed change of a policy's own lists (policy) or of
// a shared list's entries (shared).
type listChange struct{ policy, shared string }

// ListsChanged tells Run that the entries of policy's own lists (policy
// set) or of shared list shared changed: only those lists are compiled
// again, not the rules (a group's change rebuilds everything, since its
// numbers are in the rules that name it). It never blocks; when a change
// is pending already, everything is rebuilt.
func (m *Manager) ListsChanged(policy, shared string) {
	offer(m, m.listCh, listChange{policy: policy, shared: shared})
}

// applyLists swaps in the live snapshot with the changed lists compiled,
// if that change is the one since the live snapshot was built; otherwise
// (false) the caller rebuilds everything.
func (m *Manager) applyLists(ctx context.Context, lc listChange) bool {
	cur, v, ok := m.next(ctx)
	if !ok {
		return false
	}
	var next *callpolicy.Snapshot
	n := 0
	if lc.policy != "" {
		allow, err := m.store.ListEntries(ctx, lc.policy, callpolicy.AllowList)
		if err != nil {
			return false
		}
		block, err := m.store.ListEntries(ctx, lc.policy, callpolicy.BlockList)
		if err != nil {
			return false
		}
		if next, err = cur.WithLists(lc.policy, allow, block); err != nil {
			return false
		}
		n = len(allow) + len(block)
	} else {
		cfg, err := m.store.LoadSharedList(ctx, lc.shared)
		if err != nil || cfg.List.Version != v {
			return false
		}
		c, err := callpolicy.CompileSharedList(&cfg)
		if err != nil {
			return false
		}
		if next, err = cur.WithSharedList(c); err != nil {
			return false
		}
		m.dirMu.Lock()
		if m.shared != nil {
			m.shared[c.ID()] = c
		}
		m.dirMu.Unlock()
		n = len(cfg.Entries)
	}
	// The version read above is the store's after this change: a change
	// committed since would show as a newer version at the next check.
	if v2, err := m.store.ConfigVersion(ctx); err != nil || v2 != v {
		return false
	}
	m.swap(ctx, next, v, "lists", n)
	return true
}

// RuleIndex returns the live snapshot's source hashes of policyID's rules
// (callpolicy.Snapshot.RuleIndex) and the config version the snapshot was
// built from; ok=false before the first load or for an unknown policy.
func (m *Manager) RuleIndex(policyID string) (index []callpolicy.HashID, version int64, ok bool) {
	// The version is read first: a swap in between makes it older than
	// the snapshot, and the store's newer version then refuses the diff.
	v := m.version.Load()
	s := m.engine.Snapshot()
	if s == nil {
		return nil, 0, false
	}
	index, ok = s.RuleIndex(policyID)
	return index, v, ok
}

// ChangingRules is Replacing for an incremental replacement: it compiles
// the live policy with removed taken out and added put in
// (callpolicy.Snapshot.WithRuleChanges) while the caller stores them.
// When that is better compiled whole (callpolicy.ErrRebuild), the policy
// is rebuilt from the store once the change is committed.
func (m *Manager) ChangingRules(policyID string, removed []int64, added []callpolicy.Rule) (done func(stored bool)) {
	m.replacing.Add(1)
	r := &replaced{policyID: policyID, done: make(chan struct{})}
	m.compiles.Add(1)
	go func() {
		defer m.compiles.Done()
		defer close(r.done)
		s := m.engine.Snapshot()
		if s == nil {
			r.err = callpolicy.ErrRebuild
			return
		}
		r.cp, r.err = s.WithRuleChanges(policyID, removed, added)
		r.incremental = true
		r.n = len(added)
	}()
	return func(stored bool) {
		if !stored {
			m.replacing.Add(-1)
			return
		}
		select {
		case m.rulesCh <- r:
		default:
			m.replacing.Add(-1)
			m.Changed()
		}
	}
}

// Run keeps the live snapshot current and persists hit counts until ctx
// ends, then waits for the compiles Replacing started.
func (m *Manager) Run(ctx context.Context) {
	defer m.compiles.Wait()
	changes := m.store.Changes(ctx)
	check := time.NewTicker(m.checkEvery)
	defer check.Stop()
	hits := time.NewTicker(m.hitsEvery)
	defer hits.Stop()
	m.check(ctx) // anything committed between Load and the LISTEN above
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.reload:
			m.rebuild(ctx)
		case r := <-m.rulesCh:
			start := time.Now()
			ok, err := m.applyReplaced(ctx, r)
			m.replacing.Add(-1)
			if err != nil && ctx.Err() == nil {
				m.log.Warn("recompiling the replaced policy failed; rebuilding everything", "policy", r.policyID, "err", err)
			}
			if !ok {
				m.rebuild(ctx)
				continue
			}
			m.log.Debug("policy recompiled", "policy", r.policyID, "compiled", r.n,
				"version", m.version.Load(), "took", time.Since(start))
		case dc := <-m.dirCh:
			if !m.applyDirectory(ctx, dc) {
				m.rebuild(ctx)
			}
		case lc := <-m.listCh:
			if !m.applyLists(ctx, lc) {
				m.rebuild(ctx)
			}
		case _, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			m.check(ctx)
		case <-check.C:
			m.check(ctx)
		case <-hits.C:
			m.FlushHits(ctx)
		}
	}
}

// check rebuilds when the stored version differs from the live one, so
// changes made by other nodes (or missed notifications) are caught.
func (m *Manager) check(ctx context.Context) {
	v, err := m.store.ConfigVersion(ctx)
	if err != nil {
		return
	}
	if v != m.version.Load() && m.replacing.Load() == 0 {
		m.rebuild(ctx)
	}
}

func (m *Manager) rebuild(ctx context.Context) {
	start := time.Now()
	if err := m.Load(ctx); err != nil {
		if ctx.Err() == nil {
			m.log.Error("policy reload failed; keeping the previous snapshot", "err", err)
		}
		return
	}
	m.log.Debug("policies reloaded", "version", m.version.Load(), "took", time.Since(start))
}

// FlushHits persists the hit counts counted since the last flush. It runs
// even when ctx is done (at shutdown), without ctx's cancellation.
func (m *Manager) FlushHits(ctx context.Context) {
	hits := m.engine.DrainHits()
	if len(hits) == 0 {
		return
	}
	out := make(map[int64]store.RuleHit, len(hits))
	for id, h := range hits {
		out[id] = store.RuleHit{Count: h.Count, Last: h.Last}
	}
	if err := m.store.AddRuleHits(context.WithoutCancel(ctx), out); err != nil {
		m.log.Warn("saving rule hit counts", "err", err)
	}
}

// replaced is a bulk replacement of one policy's rules, compiled while the
// store writes it.
type replaced struct {
	policyID string
	n        int           // rules and list entries compiled
	done     chan struct{} // closed when cp or err is set
	cp       *callpolicy.CompiledPolicy
	err      error
	// incremental: the rules changed were compiled beside the kept ones
	// (ChangingRules), not the whole policy.
	incremental bool
}

// compilePolicy compiles policyID with rules and its lists as stored now,
// returning how many rules and entries it compiled.
func (m *Manager) compilePolicy(policyID string, rules []callpolicy.Rule) (*callpolicy.CompiledPolicy, int, error) {
	ctx := context.Background()
	cfg := callpolicy.PolicyConfig{Rules: rules}
	var err error
	if cfg.Policy, err = m.store.GetPolicy(ctx, policyID); err != nil {
		return nil, 0, fmt.Errorf("policy %q: %w", policyID, err)
	}
	if cfg.Allow, err = m.store.ListEntries(ctx, policyID, callpolicy.AllowList); err != nil {
		return nil, 0, fmt.Errorf("allow list of %q: %w", policyID, err)
	}
	if cfg.Block, err = m.store.ListEntries(ctx, policyID, callpolicy.BlockList); err != nil {
		return nil, 0, fmt.Errorf("block list of %q: %w", policyID, err)
	}
	n := len(cfg.Rules) + len(cfg.Allow) + len(cfg.Block)
	// The library of the live snapshot: applyReplaced swaps the result in
	// only if the replacement is the one change since that snapshot.
	cp, err := callpolicy.CompilePolicy(&cfg, m.lib.Load()) // it orders the rules by priority, then id
	if err != nil {
		return nil, 0, fmt.Errorf("compile policy %q: %w", policyID, err)
	}
	return cp, n, nil
}

// applyReplaced swaps in the policy compiled by Replacing, keeping every
// other policy of the live snapshot. It applies only if that replacement
// is the one change since the live snapshot was built; otherwise
// (ok=false) the caller rebuilds everything.
func (m *Manager) applyReplaced(ctx context.Context, r *replaced) (ok bool, err error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	v, err := m.store.ConfigVersion(ctx)
	if err != nil {
		return false, fmt.Errorf("config version: %w", err)
	}
	cur := m.engine.Snapshot()
	if cur != nil && v == m.version.Load() {
		return true, nil // a full reload (the periodic version check) got there first
	}
	if cur == nil || v != m.version.Load()+1 {
		return false, nil
	}
	if errors.Is(r.err, callpolicy.ErrRebuild) {
		return false, nil // a change better compiled whole: the caller rebuilds
	}
	if r.err != nil {
		return false, r.err
	}
	scope := "policy"
	if r.incremental {
		scope = "policy_changes"
	}
	m.swap(ctx, cur.With(r.cp), v, scope, r.n)
	return true, nil
}

// bigReload is the number of rules and entries from which a swap returns
// the replaced snapshot's memory to the OS at once: the runtime would keep
// most of it as idle heap for minutes.
const bigReload = 10_000

// swap makes snap live as built from config version v; scope and the
// number of rules and entries compiled go to the metrics.
func (m *Manager) swap(ctx context.Context, snap *callpolicy.Snapshot, v int64, scope string, compiled int) {
	// Hits counted against the old snapshot are persisted before the swap.
	m.FlushHits(ctx)
	m.engine.Swap(snap)
	// Counted before the version shows: whoever sees the version live
	// (a test's settle, the API's version check) sees the reload counted.
	m.reloads.WithLabelValues(scope).Inc()
	m.version.Store(v)
	if compiled >= bigReload {
		debug.FreeOSMemory()
	}
}
