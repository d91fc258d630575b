package xdr

// What an exactly-once reader needs of the correlator to checkpoint it: the
// places of the copies of the transactions still open (Open), and a way back
// to an empty correlator when the reader rewinds to its checkpoint (Reset).

// Open calls fn with the source and offset of every copy of every pending
// transaction that was added with AddFrom, when the correlator was made
// with Config.TrackOffsets (else it calls fn for none). Reading those
// copies again, in their order, into an empty correlator makes the same
// pending transactions.
func (x *Correlator) Open(fn func(src uint32, off int64)) {
	if !x.track {
		return
	}
	x.eachPending(func(t *txn) {
		for _, a := range t.offs {
			fn(a.src, a.off)
		}
	})
}

// Reset forgets every pending transaction, without a record, and every
// tombstone: the correlator is as new but for the NFs it learned. A reader
// that rewinds to its last checkpoint (an aborted Kafka transaction) resets
// its correlator, which held what the checkpoint does not.
func (x *Correlator) Reset() {
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		n := s.waiting.n + s.lingering.n
		clear(s.pending)
		s.waiting, s.lingering = txnList{}, txnList{}
		clear(s.tombs)
		clear(s.tombQ)
		s.tombQ, s.tombHead = s.tombQ[:0], 0
		s.mu.Unlock()
		x.pending.Add(-int64(n))
	}
}
