package director

import "sync"

// A ledger is the one owner of a feed's per-partition offsets on this node:
// what its reader holds, what it handed the feed, what the sink confirmed,
// what was committed and what was ever delivered. One lock guards it all;
// the readers (the tap, a detached member's catch-up, the feed's own
// consumer), the sender and the group callbacks all go through it.
//
// Per partition:
//
//   - owned, epoch: the reader holds the partition in its current
//     assignment. Every assignment starts a new epoch; a confirmation
//     carries the epoch its copies were handed in and counts for commit only
//     in that epoch, so a batch still in the pipeline when its partition is
//     revoked (and perhaps assigned back) never moves the commit.
//   - next: the offset the feed is handed next; copies below it were handed
//     (a tap member skips them when the tap reads them again). Unknown
//     (-1) until the assignment's start is known.
//   - done: the offset after the last copy the sink confirmed in this
//     epoch: what the next commit writes. Confirmations only raise it.
//   - committed: the last done that was committed.
//   - high: the highest offset ever delivered to the feed in this process,
//     whatever the epoch or the feed's incarnation, to count redeliveries.
//
// Transitions (table-tested in ledger_test.go):
//
//	assign(k, start)      owned, epoch+1, next = start, done = committed = unset
//	keep(k, e)            if owned in epoch e: reposition (kept across a new membership)
//	takeRepositions()     start of the owned partitions to reposition; clears reposition
//	hand(k, first, next)  if owned: reports a gap when first > next; next = next
//	confirm(k, e, last)   high = max(high, last); if owned in epoch e: done = max(done, last+1)
//	pending()             done of the owned partitions where done > committed
//	committedUpTo(offs)   committed = offs[k], for partitions still owned in the same epoch
//	current(offs)         offs less the partitions no longer owned in the epoch they were taken in
//	revoke(k)             returns done if uncommitted (the reader commits it while it
//	                      still may); forgets all but high
//	lose(k)               forgets all but high: another node may have committed past
//	                      it, so nothing of it is committed from here
//	reset()               a new incarnation of the feed: forgets all but high
//
// Who commits: copy feeds on a tap commit pending() through the tap, which
// first proves its own group membership (tap.fencedCommit); copy feeds
// reading on their own commit pending() through their consumer group's
// member, with the member and generation whose assignment the ledger holds
// (feed.commitOwn). Either way nothing commits a lost partition. (xdr feeds
// commit the low water of their open transactions through franz-go's
// marks.)
type ledger struct {
	mu    sync.Mutex
	parts map[tp]*partState
}

type partState struct {
	owned     bool
	epoch     uint64
	next      int64 // -1: unknown
	done      int64 // -1: nothing confirmed in this epoch
	committed int64 // -1: nothing committed in this epoch
	high      int64 // -1: nothing ever delivered
	doneAt    int64 // the timestamp (ns) of the record at done-1; 0: none
	start     int64 // where this epoch started; -1: not known
	// reposition: the partition was kept across a new membership; the
	// reader moves its cursor to start before its next poll (takeRepositions).
	reposition bool
}

func newLedger() *ledger { return &ledger{parts: map[tp]*partState{}} }

// part is k's state, made on first use; l.mu is held.
func (l *ledger) part(k tp) *partState {
	s := l.parts[k]
	if s == nil {
		s = &partState{next: -1, done: -1, committed: -1, high: -1, start: -1}
		l.parts[k] = s
	}
	return s
}

// assign starts a new epoch of k at start (-1: not known yet) and returns
// the epoch.
func (l *ledger) assign(k tp, start int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.part(k)
	s.owned = true
	s.epoch++
	s.next, s.done, s.committed, s.start, s.reposition = start, -1, -1, start, false
	return s.epoch
}

// keep notes that k, started in epoch, was kept across a new membership:
// the reader's cursor is to move to its start (takeRepositions), unless k
// is revoked, lost or assigned again first.
func (l *ledger) keep(k tp, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.parts[k]; s != nil && s.owned && s.epoch == epoch {
		s.reposition = true
	}
}

// takeRepositions returns, and forgets, the starts of the partitions kept
// across a new membership (keep) that are still owned in that epoch and
// whose start is known (else the cursor stays).
func (l *ledger) takeRepositions() map[tp]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var to map[tp]int64
	for k, s := range l.parts {
		if !s.reposition {
			continue
		}
		s.reposition = false
		if s.owned && s.start >= 0 {
			if to == nil {
				to = map[tp]int64{}
			}
			to[k] = s.start
		}
	}
	return to
}

// next is where k continues (-1: not known yet) and whether k is owned.
func (l *ledger) next(k tp) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.parts[k]
	if s == nil || !s.owned {
		return -1, false
	}
	return s.next, true
}

// hand notes that the reader handed the feed k's copies from first up to
// next (exclusive). It returns the epoch they belong to, whether k is owned
// (copies of a partition not owned are not handed), the offset the reader
// should have started at and whether first is past it (a gap, which
// checkGap looks into), and the highest offset ever delivered of k, -1 for
// none (copies at or below it are redeliveries).
func (l *ledger) hand(k tp, first, next int64) (h handed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.part(k)
	h.high = s.high
	if !s.owned {
		return h
	}
	h.owned, h.epoch, h.expected = true, s.epoch, s.next
	h.gap = s.next >= 0 && first > s.next
	if next > s.next {
		s.next = next
	}
	return h
}

// handed is what hand reports.
type handed struct {
	owned    bool
	epoch    uint64
	expected int64
	gap      bool
	high     int64
}

// confirm notes that the sink confirmed k's copies up to last (a record
// with timestamp at, ns), handed in epoch.
func (l *ledger) confirm(k tp, epoch uint64, last, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.part(k)
	if last > s.high {
		s.high = last
	}
	if s.owned && s.epoch == epoch && last+1 > s.done {
		s.done, s.doneAt = last+1, at
	}
}

// progress is, for each partition owned whose start is known, where the
// copies the sink confirmed in this epoch end (else where it started) and
// the timestamp of the last (0: none confirmed yet).
func (l *ledger) progress() map[tp]confirmedTo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[tp]confirmedTo{}
	for k, s := range l.parts {
		switch {
		case !s.owned:
		case s.done >= 0:
			out[k] = confirmedTo{s.done, s.doneAt}
		case s.start >= 0:
			out[k] = confirmedTo{s.start, 0}
		}
	}
	return out
}

// confirmedTo is a partition's progress: confirmed copies end before
// offset next, and the last was stamped at (ns).
type confirmedTo struct {
	next, at int64
}

// pendingCommit is a partition's offset to commit and the epoch it is of.
type pendingCommit struct {
	at    int64
	epoch uint64
}

// pending is what to commit: done of each owned partition past its last
// commit.
func (l *ledger) pending() map[tp]pendingCommit {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[tp]pendingCommit
	for k, s := range l.parts {
		if s.owned && s.done > s.committed {
			if out == nil {
				out = map[tp]pendingCommit{}
			}
			out[k] = pendingCommit{s.done, s.epoch}
		}
	}
	return out
}

// committedUpTo records a successful commit of offs.
func (l *ledger) committedUpTo(offs map[tp]pendingCommit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range offs {
		if s := l.parts[k]; s != nil && s.owned && s.epoch == c.epoch && c.at > s.committed {
			s.committed = c.at
		}
	}
}

// current is what of offs (a pending() taken earlier) is still owned in
// the epoch it was taken in: a commit proven by a membership of a later
// generation must not carry what an earlier one confirmed.
func (l *ledger) current(offs map[tp]pendingCommit) map[tp]pendingCommit {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range offs {
		if s := l.parts[k]; s == nil || !s.owned || s.epoch != c.epoch {
			delete(offs, k)
		}
	}
	return offs
}

// revoke ends k's epoch: the reader gives it up in an orderly rebalance and
// may still commit done, which is returned if it is not committed yet.
func (l *ledger) revoke(k tp) (pendingCommit, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.parts[k]
	if s == nil || !s.owned {
		return pendingCommit{}, false
	}
	c, ok := pendingCommit{s.done, s.epoch}, s.done > s.committed
	s.forget()
	return c, ok
}

// lose ends k's epoch with nothing committed.
func (l *ledger) lose(k tp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.parts[k]; s != nil {
		s.forget()
	}
}

// owned is the partitions owned now.
func (l *ledger) owned() map[string][]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int32{}
	for k, s := range l.parts {
		if s.owned {
			out[k.topic] = append(out[k.topic], k.partition)
		}
	}
	return out
}

// owns reports whether k is owned in epoch.
func (l *ledger) owns(k tp, epoch uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.parts[k]
	return s != nil && s.owned && s.epoch == epoch
}

// reset forgets everything but what was delivered: a new incarnation of
// the feed starts from its group's commit.
func (l *ledger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.parts {
		s.forget()
	}
}

func (s *partState) forget() {
	s.owned = false
	s.next, s.done, s.committed, s.doneAt, s.start, s.reposition = -1, -1, -1, 0, -1, false
}
