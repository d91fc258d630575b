package director

import "github.com/signalbox/signalbox/internal/datadirector/nfcopy"

// SequencingTransaction is the feed option that writes each transaction's
// request before its response (the reference product's "message
// sequencing"), within what one poll fetched.
const SequencingTransaction = "transaction"

// sequencer puts, in a batch, every response after the request of its pair
// (nfcopy.Copy.PairKey) when that request came later in the same batch:
// copies of one transaction come from different partitions and can be
// fetched response first. It keeps nothing across batches, so it adds no
// latency and cannot hold a copy back from its commit: a response whose
// request is in another poll is left where it is. Its maps are reused:
// each pipeline batch has its own (pollBatch.seq), so no two goroutines
// share one.
type sequencer struct {
	keys  []uint64       // each copy's pair key, by index in the batch
	reqAt map[uint64]int // pair key -> index of its first request in the batch
	held  map[uint64][]*nfcopy.Copy
	out   []*nfcopy.Copy
}

// sequence reorders batch in place and returns how many responses it moved.
func (s *sequencer) sequence(batch []*nfcopy.Copy) int {
	if s.reqAt == nil {
		s.reqAt, s.held = make(map[uint64]int), make(map[uint64][]*nfcopy.Copy)
	}
	clear(s.reqAt)
	s.keys = s.keys[:0]
	for i, c := range batch {
		k := c.PairKey()
		s.keys = append(s.keys, k)
		if c.Direction.IsRequest() && k != 0 {
			if _, ok := s.reqAt[k]; !ok {
				s.reqAt[k] = i
			}
		}
	}
	if len(s.reqAt) == 0 {
		return 0
	}
	moved := 0
	s.out = s.out[:0]
	for i, c := range batch {
		k := s.keys[i]
		if !c.Direction.IsRequest() && k != 0 {
			if j, ok := s.reqAt[k]; ok && j > i {
				s.held[k] = append(s.held[k], c)
				moved++
				continue
			}
		}
		s.out = append(s.out, c)
		if c.Direction.IsRequest() && k != 0 && s.reqAt[k] == i {
			if h := s.held[k]; len(h) > 0 {
				s.out = append(s.out, h...)
				clear(h)
				s.held[k] = h[:0]
			}
		}
	}
	if moved > 0 {
		copy(batch, s.out)
	}
	clear(s.out)
	for k, h := range s.held {
		if len(h) == 0 {
			delete(s.held, k)
		}
	}
	return moved
}
