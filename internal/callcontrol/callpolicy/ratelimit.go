package callpolicy

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// limiter counts calls per (policy, calling number) and per policy with a
// sliding-window counter: the estimate is the current fixed window's count
// plus the previous window's count weighted by how much of it still overlaps
// the sliding window. It needs 40 bytes per number instead of a timestamp
// per call, admits exactly N calls in a fresh window, and errs by at most
// the previous window's shape on steady traffic (the usual trade-off; a
// toll-fraud or TDoS burst is caught either way).
//
// Windows are aligned to multiples of their length since the Unix epoch,
// so that nodes of a cluster count in the same windows: with cluster sync
// on (Engine.TrackLimits), each node counts its own calls, hands the
// counts that changed to a syncer (Engine.LimitsChanged) and is told the
// sum of the other nodes' counts (Engine.ApplyRemoteLimits), which its
// estimate adds; a call never waits for the sync.
//
// State lives in the Engine, not the snapshot, so a config change does not
// forget who is being blocked. Memory is bounded: each shard holds at most
// shardCap keys; when a shard is full, idle keys are dropped, and if none
// are idle an eighth of the shard is dropped at random (Go map order). An
// attacker rotating calling numbers faster than that is what the overall
// limit is for.
type limiter struct {
	seed   maphash.Seed
	shards [limShards]limShard
	track  atomic.Bool // cluster sync: note the keys live calls change
}

const (
	limShards = 64
	shardCap  = 4096 // 256k keys in all, ~20 MB worst case
)

type limKey struct {
	policy string
	number string // the calling or called number; "" for overall
	kind   uint8  // limCalling, limCalled or limOverall
}

// Kinds of limKey.
const (
	limCalling uint8 = iota
	limCalled
	limOverall
)

type limState struct {
	winStart     int64 // unix nanos
	winLen       int64
	prev, cur    int64
	blockedUntil int64
	idleAfter    int64 // after this the state says nothing: safe to drop
	// The other nodes' counts: rcur in the window starting at rwin, rprev
	// in the one before; rblocked the latest block one of them set.
	rwin, rcur, rprev int64
	rblocked          int64
}

type limShard struct {
	mu    sync.Mutex
	m     map[limKey]limState
	dirty map[limKey]struct{} // changed by live calls since LimitsChanged
}

// remote returns the other nodes' counts in the window starting at win
// and the one before it.
func (st *limState) remote(win, w int64) (cur, prev int64) {
	switch st.rwin {
	case 0:
		return 0, 0
	case win:
		return st.rcur, st.rprev
	case win - w:
		return 0, st.rcur
	}
	return 0, 0
}

func newLimiter() *limiter {
	l := &limiter{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[limKey]limState)
		l.shards[i].dirty = make(map[limKey]struct{})
	}
	return l
}

func (l *limiter) shard(k limKey) *limShard {
	h := maphash.String(l.seed, k.number) ^ maphash.String(l.seed, k.policy) ^ uint64(k.kind)
	return &l.shards[h%limShards]
}

// take counts one call against lim and reports whether it is over the limit
// (or still blocked from an earlier excess). With live false nothing is
// changed: the answer is what a live call would get now.
func (l *limiter) take(k limKey, lim *Limit, block time.Duration, now int64, live bool) bool {
	w := int64(lim.WindowSeconds) * int64(time.Second)
	if block <= 0 {
		block = time.Duration(w)
	}
	sh := l.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st, ok := sh.m[k]
	if !ok || st.winLen != w {
		st = limState{winStart: now - now%w, winLen: w, rwin: st.rwin, rcur: st.rcur, rprev: st.rprev, rblocked: st.rblocked}
		if ok && st.rwin%w != 0 {
			st.rwin, st.rcur, st.rprev = 0, 0, 0 // counted in windows of another length
		}
	}
	if now < st.blockedUntil || now < st.rblocked {
		return true
	}
	st.advance(now)
	// A clock that went back (or an older injected now) counts in the
	// current window rather than rewinding state.
	elapsed := max(now-st.winStart, 0)
	rc, rp := st.remote(st.winStart, w)
	est := st.cur + rc + (st.prev+rp)*(w-elapsed)/w
	over := est+1 > int64(lim.Calls)
	if !live {
		return over
	}
	if over {
		st.blockedUntil = now + int64(block)
	} else {
		st.cur++
	}
	st.idleAfter = max(st.winStart+2*w, st.blockedUntil)
	if l.track.Load() {
		if _, seen := sh.dirty[k]; !seen {
			// A copy: the caller's strings may live in a reused buffer.
			sh.dirty[limKey{policy: strings.Clone(k.policy), number: strings.Clone(k.number), kind: k.kind}] = struct{}{}
		}
	}
	if !ok {
		if len(sh.m) >= shardCap {
			sh.evict(now)
		}
		k.number = strings.Clone(k.number) // the caller's string may live in a reused buffer
		k.policy = strings.Clone(k.policy)
	}
	sh.m[k] = st
	return over
}

// advance moves the state's windows up to now.
func (st *limState) advance(now int64) {
	w := st.winLen
	if d := now - st.winStart; d >= w {
		if d < 2*w {
			st.prev = st.cur
		} else {
			st.prev = 0
		}
		st.cur = 0
		st.winStart += d / w * w
	}
}

// LimitCount is one rate-limit key's count in one window, as nodes of a
// cluster exchange them: a node hands out its own (Engine.LimitsChanged)
// and is told the sum of the others' (Engine.ApplyRemoteLimits).
type LimitCount struct {
	Policy       string
	Kind         uint8  // 0 per calling, 1 per called, 2 overall
	Number       string // the calling or called number; "" overall
	Window       int64  // unix nanos of the window's start (a multiple of WindowLen)
	WindowLen    int64  // nanos
	Count        int64
	BlockedUntil int64 // unix nanos; 0 if not blocked
}

// changed returns the current counts of the keys live calls changed since
// the last call, and forgets them.
func (l *limiter) changed(now int64) []LimitCount {
	var out []LimitCount
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k := range sh.dirty {
			st, ok := sh.m[k]
			if !ok {
				continue
			}
			st.advance(now)
			out = append(out, LimitCount{Policy: k.policy, Kind: k.kind, Number: k.number, Window: st.winStart, WindowLen: st.winLen,
				Count: st.cur, BlockedUntil: st.blockedUntil})
		}
		clear(sh.dirty)
		sh.mu.Unlock()
	}
	return out
}

// applyRemote records the other nodes' counts.
func (l *limiter) applyRemote(cs []LimitCount, now int64) {
	for i := range cs {
		c := &cs[i]
		if c.WindowLen <= 0 || c.Window%c.WindowLen != 0 {
			continue
		}
		k := limKey{policy: c.Policy, number: c.Number, kind: c.Kind}
		sh := l.shard(k)
		sh.mu.Lock()
		st, ok := sh.m[k]
		if !ok || st.winLen != c.WindowLen {
			if !ok && len(sh.m) >= shardCap {
				sh.evict(now)
			}
			st = limState{winStart: now - now%c.WindowLen, winLen: c.WindowLen}
		}
		switch w := c.WindowLen; {
		case c.Window == st.rwin:
			st.rcur = c.Count
		case st.rwin != 0 && c.Window == st.rwin-w:
			st.rprev = c.Count
		case c.Window > st.rwin:
			if st.rwin != 0 && c.Window == st.rwin+w {
				st.rprev = st.rcur
			} else {
				st.rprev = 0
			}
			st.rwin, st.rcur = c.Window, c.Count
		}
		st.rblocked = max(st.rblocked, c.BlockedUntil)
		st.idleAfter = max(st.idleAfter, c.Window+2*c.WindowLen, st.rblocked)
		sh.m[k] = st
		sh.mu.Unlock()
	}
}

// forgetRemote drops every other node's count and block: the limits fall
// back to this node's own counts.
func (l *limiter) forgetRemote() {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, st := range sh.m {
			if st.rwin != 0 || st.rblocked != 0 {
				st.rwin, st.rcur, st.rprev, st.rblocked = 0, 0, 0, 0
				sh.m[k] = st
			}
		}
		sh.mu.Unlock()
	}
}

func (sh *limShard) evict(now int64) {
	for k, st := range sh.m {
		if st.idleAfter <= now {
			delete(sh.m, k)
		}
	}
	if len(sh.m) < shardCap {
		return
	}
	drop := shardCap / 8
	for k := range sh.m {
		if drop == 0 {
			break
		}
		delete(sh.m, k)
		drop--
	}
}

// size is the number of tracked keys (tests).
func (l *limiter) size() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].m)
		l.shards[i].mu.Unlock()
	}
	return n
}
