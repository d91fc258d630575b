package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// ruleHash is a rule's source hash: of the bytes of its JSON object as
// sent, so that telling an unchanged rule from a changed one needs no
// decoding.
func ruleHash(raw []byte) uint64 {
	if h := xxhash.Sum64(raw); h != 0 {
		return h
	}
	return 1 // 0 means "no hash"
}

// maxChangedShare: an incremental replacement changes at most this share
// of the rules (added + removed over the rules sent); beyond, the whole
// set is decoded and replaced.
const maxChangedShare = 10

// incrementalReplacement replaces policy pid's rules with the array body by
// writing and compiling only what changed: each element's bytes are hashed
// and matched against the hashes of the rules the live snapshot holds
// (Config.Live's RuleIndex), and only the elements that match none are decoded.
// done=false when it does not apply (no index, a configuration changed
// since the snapshot, a body that is not a clean array, too many changes,
// or a conflict while storing): the caller then replaces everything.
func (s *server) incrementalReplacement(r *http.Request, pid string, body []byte) (n int, done bool, err error) {
	if s.cfg.Live == nil {
		return 0, false, nil
	}
	idx, ver, ok := s.cfg.Live.RuleIndex(pid)
	if !ok {
		return 0, false, nil
	}
	cur, err := s.store.ConfigVersion(r.Context())
	if err != nil || cur != ver {
		return 0, false, nil
	}
	spans, ok := arraySpans(body)
	if !ok || len(spans) == 0 {
		return 0, false, nil
	}
	// The elements' hashes, sorted, merged with the index (sorted too):
	// a hash an unused rule of the index carries is that rule, kept; the
	// hashes left over on either side are the rules added and removed.
	hashes := make([]uint64, len(spans))
	for i, sp := range spans {
		hashes[i] = ruleHash(body[sp[0]:sp[1]])
	}
	sorted := slices.Clone(hashes)
	slices.Sort(sorted)
	limit := max(len(spans)/maxChangedShare, 1)
	unmatched := map[uint64]int{}
	nAdded := 0
	var removed []int64
	j := 0
	for _, h := range sorted {
		for j < len(idx) && idx[j].Hash < h {
			removed = append(removed, idx[j].ID)
			j++
		}
		if j < len(idx) && idx[j].Hash == h {
			j++
			continue
		}
		unmatched[h]++
		if nAdded++; nAdded > limit {
			return 0, false, nil
		}
	}
	for ; j < len(idx); j++ {
		removed = append(removed, idx[j].ID)
	}
	if nAdded+len(removed) > limit {
		return 0, false, nil
	}
	// Which elements are the added ones, in body order.
	changed := make([]int, 0, nAdded)
	for i, h := range hashes {
		if n := unmatched[h]; n > 0 {
			unmatched[h] = n - 1
			changed = append(changed, i)
		}
	}
	added := make([]callpolicy.Rule, 0, len(changed))
	for _, i := range changed {
		var in ruleInput
		raw := body[spans[i][0]:spans[i][1]]
		if _, ok := fastRule(raw, 0, &in); !ok {
			in = ruleInput{}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return 0, false, nil // the full path reports it
			}
		}
		if in.PolicyID != "" && in.PolicyID != pid {
			return 0, true, in.checkPolicyID(fmt.Sprintf("rules[%d].policy_id", i), pid)
		}
		rule := in.rule(pid)
		rule.SrcHash = hashes[i]
		if err := callpolicy.ValidateRule(&rule); err != nil {
			return 0, true, prefixField(fmt.Sprintf("rules[%d]", i), err)
		}
		added = append(added, rule)
	}
	if err := s.checkDirectories(r, &callpolicy.PolicyConfig{Rules: added}, false); err != nil {
		return 0, true, err
	}
	if err := s.checkGroupRefs(r, added, false); err != nil {
		return 0, true, err
	}
	var stored func(ok bool)
	err = s.store.ChangeRules(r.Context(), pid, ver, removed, added, func() { stored = s.cfg.Live.ChangingRules(pid, removed, added) })
	if stored != nil {
		stored(err == nil)
	}
	if errors.Is(err, store.ErrConflict) {
		return 0, false, nil // changed meanwhile: replace everything
	}
	if err == nil {
		s.logChange(r, auditRules, "replace rules incrementally", pid, "rules", len(spans), "added", len(added), "removed", len(removed))
	}
	return len(spans), true, err
}

// arraySpans returns the byte span of every element of a JSON array of
// objects, or false if body is not one (the decoder then says why).
func arraySpans(body []byte) ([][2]int, bool) {
	p := skipWS(body, 0)
	if p >= len(body) || body[p] != '[' {
		return nil, false
	}
	p = skipWS(body, p+1)
	var out [][2]int
	if p < len(body) && body[p] == ']' {
		return out, skipWS(body, p+1) == len(body)
	}
	for {
		if len(out)%1024 == 1023 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
		if p >= len(body) || body[p] != '{' {
			return nil, false
		}
		end, ok := skipValue(body, p)
		if !ok {
			return nil, false
		}
		out = append(out, [2]int{p, end})
		p = skipWS(body, end)
		if p >= len(body) {
			return nil, false
		}
		switch body[p] {
		case ',':
			p = skipWS(body, p+1)
		case ']':
			return out, skipWS(body, p+1) == len(body)
		default:
			return nil, false
		}
	}
}

// skipValue returns the offset just past the JSON object or array at
// body[p] (strings and nesting followed; the content is not checked: the
// elements that are decoded are checked then, and the others are bytes
// already accepted once).
func skipValue(body []byte, p int) (int, bool) {
	depth := 0
	for i := p; i < len(body); i++ {
		switch body[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			// To the closing quote: the next quote not escaped by an odd
			// run of backslashes (IndexByte is vectorised; most of a
			// rule's bytes are in its strings).
			for {
				k := bytes.IndexByte(body[i+1:], '"')
				if k < 0 {
					return 0, false
				}
				i += k + 1
				bs := 0
				for b := i - 1; b > p && body[b] == '\\'; b-- {
					bs++
				}
				if bs%2 == 0 {
					break
				}
			}
		}
	}
	return 0, false
}
