package director

import "sync"

// invalidOnce remembers the undecodable records this node has met lately,
// so that one is counted in signalbox_copy_invalid_total and dead-lettered
// once, however many feeds read its topic (each with its own reader or tap).
// Each feed still counts it in its own status (FeedStatus.Invalid). It keeps
// the last invalidOnceSize records: one met again after that, or after a
// restart, or on another node, is counted and dead-lettered again.
type invalidOnce struct {
	mu   sync.Mutex
	seen map[recordAt]struct{}
	ring []recordAt
	next int
}

const invalidOnceSize = 4096

// first reports whether k is met for the first time, and remembers it.
func (o *invalidOnce) first(k recordAt) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = make(map[recordAt]struct{}, invalidOnceSize)
		o.ring = make([]recordAt, 0, invalidOnceSize)
	}
	if _, ok := o.seen[k]; ok {
		return false
	}
	if len(o.ring) < invalidOnceSize {
		o.ring = append(o.ring, k)
	} else {
		delete(o.seen, o.ring[o.next])
		o.ring[o.next] = k
		o.next = (o.next + 1) % invalidOnceSize
	}
	o.seen[k] = struct{}{}
	return true
}
