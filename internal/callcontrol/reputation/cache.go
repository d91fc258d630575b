package reputation

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// cache holds a policy's answers by number for ttl, at most size of them;
// past size the oldest entries go first. It is split in shards so that
// concurrent calls rarely wait on one lock.
type cache struct {
	size   int
	ttl    time.Duration
	url    string
	counts [numResults]prometheus.Counter // the policy's lookups by result
	seed   maphash.Seed
	shards [16]cacheShard
}

type cacheShard struct {
	mu    sync.Mutex
	m     map[string]cacheEntry
	order []string // insertion order, for eviction; a ring from head
	head  int
	max   int
}

type cacheEntry struct {
	res     callpolicy.ReputationResult
	expires int64 // unix ns
}

func newCache(size int, ttl time.Duration, url string) *cache {
	c := &cache{size: size, ttl: ttl, url: url, seed: maphash.MakeSeed()}
	per := max(1, (size+len(c.shards)-1)/len(c.shards))
	for i := range c.shards {
		c.shards[i].m = make(map[string]cacheEntry)
		c.shards[i].max = per
	}
	return c
}

func (c *cache) count(result int, live bool) {
	if live {
		c.counts[result].Inc()
	}
}

func (c *cache) shard(number string) *cacheShard {
	return &c.shards[maphash.String(c.seed, number)%uint64(len(c.shards))]
}

func (c *cache) get(number string, now time.Time) (callpolicy.ReputationResult, bool) {
	s := c.shard(number)
	s.mu.Lock()
	e, ok := s.m[number]
	s.mu.Unlock()
	if !ok || now.UnixNano() >= e.expires {
		return callpolicy.ReputationResult{}, false
	}
	e.res.Cached = true
	return e.res, true
}

func (c *cache) put(number string, res callpolicy.ReputationResult, now time.Time) {
	s := c.shard(number)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[number]; !ok {
		if len(s.order) < s.max {
			s.order = append(s.order, number)
		} else {
			// Full: the oldest number makes room (it may have been
			// replaced since; its slot is reused all the same).
			delete(s.m, s.order[s.head])
			s.order[s.head] = number
			s.head = (s.head + 1) % len(s.order)
		}
	}
	s.m[number] = cacheEntry{res: res, expires: now.Add(c.ttl).UnixNano()}
}
