package callpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ErrRebuild says a change is better compiled whole (CompilePolicy): the
// policy is not in the snapshot, or its rules added since the base was
// compiled would be more than a tenth of it.
var ErrRebuild = errors.New("callpolicy: compile the policy whole")

// maxDelta is how many rules a policy's delta may hold beside a base of n.
func maxDelta(n int) int { return max(1000, n/10) }

// HashID is a rule's source hash and id.
type HashID struct {
	Hash uint64
	ID   int64
}

func cmpHashID(a, b HashID) int {
	return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.ID, b.ID))
}

// RuleIndex returns the source hash and id of every rule of policy id
// that has one (Rule.SrcHash), disabled rules included, sorted by hash
// then id; ok=false if the snapshot does not hold the policy. The slice
// belongs to the snapshot: read it only.
func (s *Snapshot) RuleIndex(id string) (index []HashID, ok bool) {
	if p := s.policies[id]; p != nil {
		return p.index, true
	}
	return nil, false
}

// WithRuleChanges compiles policy id of s with the rules removed taken out
// and added put in, without compiling the rules it keeps: they stay in
// the compiled base, those removed are marked deleted, and the added ones
// (with those added by earlier changes) form a small second layer. Calls
// see the lowest (priority, id) match of both, as if everything had been
// compiled together. added must be validated, with their ids and hashes
// set. ErrRebuild when the change is better compiled whole.
func (s *Snapshot) WithRuleChanges(id string, removed []int64, added []Rule) (*CompiledPolicy, error) {
	start := time.Now()
	old := s.policies[id]
	if old == nil {
		return nil, ErrRebuild
	}
	rm := make(map[int64]bool, len(removed))
	for _, r := range removed {
		rm[r] = true
	}
	deleted := slices.Clone(old.deleted)
	if deleted == nil {
		deleted = make([]uint64, (len(old.rules)+63)/64)
	}
	for i := range old.rules {
		if rm[old.rules[i].id] {
			deleted[i>>6] |= 1 << (i & 63)
		}
	}
	src := make([]Rule, 0, len(old.deltaSrc)+len(added))
	for i := range old.deltaSrc {
		if !rm[old.deltaSrc[i].ID] {
			src = append(src, old.deltaSrc[i])
		}
	}
	src = append(src, added...)
	if len(src) > maxDelta(len(old.rules)) {
		return nil, ErrRebuild
	}
	idx := make([]int, 0, len(src))
	for i := range src {
		if err := ValidateRule(&src[i]); err != nil {
			return nil, fmt.Errorf("policy %q: rule %d: %w", id, src[i].ID, err)
		}
		if src[i].Enabled {
			idx = append(idx, i)
		}
	}
	var actions actionSet
	d, err := compileLayer(src, idx, map[string]*time.Location{}, s.lib, &actions)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", id, err)
	}
	np := *old
	np.delta, np.deleted, np.deltaSrc, np.hits = &d, deleted, src, nil
	// The index: the old one without the removed rules, merged with the
	// added ones (both sorted).
	var add []HashID
	for i := range added {
		if h := added[i].SrcHash; h != 0 {
			add = append(add, HashID{Hash: h, ID: added[i].ID})
		}
	}
	slices.SortFunc(add, cmpHashID)
	np.index = make([]HashID, 0, len(old.index)+len(add))
	j := 0
	for _, x := range old.index {
		if rm[x.ID] {
			continue
		}
		for j < len(add) && cmpHashID(add[j], x) < 0 {
			np.index = append(np.index, add[j])
			j++
		}
		np.index = append(np.index, x)
	}
	np.index = append(np.index, add[j:]...)
	return &CompiledPolicy{p: &np, buildTime: time.Since(start)}, nil
}

// WithLists returns a snapshot in which policy id's own allow and block
// lists are compiled from allow and block, and everything else (its rules
// included) is s's: a list edit compiles the lists alone. ErrRebuild when
// s does not hold the policy.
func (s *Snapshot) WithLists(id string, allow, block []ListEntry) (*Snapshot, error) {
	old := s.policies[id]
	if old == nil {
		return nil, ErrRebuild
	}
	start := time.Now()
	np := *old
	np.hits = nil
	var actions actionSet
	var err error
	if np.allow, err = compileList(AllowList, allow, nil, &actions); err != nil {
		return nil, fmt.Errorf("policy %q: %w", id, err)
	}
	if np.block, err = compileList(BlockList, block, nil, &actions); err != nil {
		return nil, fmt.Errorf("policy %q: %w", id, err)
	}
	policies := maps.Clone(s.policies)
	policies[id] = &np
	return &Snapshot{policies: policies, lib: s.lib, buildTime: time.Since(start)}, nil
}

// WithSharedList returns a snapshot in which shared list c (block or allow)
// replaces its earlier version (or is added), every policy checking it as
// it applies; no rule is compiled. ErrRebuild for a group, whose numbers
// are compiled into the rules that name it.
func (s *Snapshot) WithSharedList(c *CompiledList) (*Snapshot, error) {
	if c.list.Kind == GroupList {
		return nil, ErrRebuild
	}
	start := time.Now()
	lib := *s.lib
	lib.shared = slices.DeleteFunc(slices.Clone(s.lib.shared), func(x *CompiledList) bool { return x.list.ID == c.list.ID })
	lib.shared = append(lib.shared, c)
	slices.SortFunc(lib.shared, func(a, b *CompiledList) int { return strings.Compare(a.list.ID, b.list.ID) })
	policies := make(map[string]*policy, len(s.policies))
	for id, p := range s.policies {
		np := *p
		np.hits = nil
		np.sharedAllow, np.sharedBlock = lib.sharedFor(id, AllowList), lib.sharedFor(id, BlockList)
		policies[id] = &np
	}
	return &Snapshot{policies: policies, lib: &lib, buildTime: time.Since(start)}, nil
}
