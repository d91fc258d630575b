package callpolicy

import (
	"hash/maphash"
	"strings"
	"sync"
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
// State lives in the Engine, not the snapshot, so a config change does not
// forget who is being blocked. Memory is bounded: each shard holds at most
// shardCap keys; when a shard is full, idle keys are dropped, and if none
// are idle an eighth of the shard is dropped at random (Go map order). An
// attacker rotating calling numbers faster than that is what the overall
// limit is for.
type limiter struct {
	seed   maphash.Seed
	shards [limShards]limShard
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
	prev, cur    int64
	blockedUntil int64
	idleAfter    int64 // after this the state says nothing: safe to drop
}

type limShard struct {
	mu sync.Mutex
	m  map[limKey]limState
}

func newLimiter() *limiter {
	l := &limiter{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[limKey]limState)
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
	if !ok {
		st = limState{winStart: now}
	}
	if now < st.blockedUntil {
		return true
	}
	if d := now - st.winStart; d >= w {
		if d < 2*w {
			st.prev = st.cur
		} else {
			st.prev = 0
		}
		st.cur = 0
		st.winStart += d / w * w
	}
	// A clock that went back (or an older injected now) counts in the
	// current window rather than rewinding state.
	elapsed := max(now-st.winStart, 0)
	est := st.cur + st.prev*(w-elapsed)/w
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
