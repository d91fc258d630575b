package store

import (
	"context"
	"fmt"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// LoadPolicies reads everything in one read transaction (one snapshot), with
// one query per table rather than per policy.
func (s *sqlStore) LoadPolicies(ctx context.Context) ([]callpolicy.PolicyConfig, error) {
	var out []callpolicy.PolicyConfig
	err := s.read(ctx, func(t tx) error {
		rs, err := t.query(ctx, `SELECT `+policyCols+` FROM policies ORDER BY id`)
		if err != nil {
			return err
		}
		idx := map[string]int{}
		for rs.Next() {
			p, err := scanPolicy(rs)
			if err != nil {
				rs.Close()
				return err
			}
			idx[p.ID] = len(out)
			out = append(out, callpolicy.PolicyConfig{Policy: p, Rules: []callpolicy.Rule{}, Allow: []callpolicy.ListEntry{}, Block: []callpolicy.ListEntry{}})
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		var n int
		if err := t.queryRow(ctx, `SELECT count(*) FROM rules`).Scan(&n); err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		rules, err := queryRules(ctx, t, n, `SELECT `+ruleCols+` FROM rules ORDER BY policy_id, priority, id`)
		if err != nil {
			return fmt.Errorf("rules: %w", err)
		}
		// Sub-slice the one big slice per policy: no per-policy copies.
		for i := 0; i < len(rules); {
			j := i
			for j < len(rules) && rules[j].PolicyID == rules[i].PolicyID {
				j++
			}
			if k, ok := idx[rules[i].PolicyID]; ok {
				out[k].Rules = rules[i:j:j]
			}
			i = j
		}
		rs, err = t.query(ctx, `SELECT `+entryCols+` FROM list_entries ORDER BY policy_id, list, id`)
		if err != nil {
			return fmt.Errorf("list entries: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			e, err := scanEntry(rs)
			if err != nil {
				return fmt.Errorf("list entries: %w", err)
			}
			k, ok := idx[e.PolicyID]
			if !ok {
				continue
			}
			if e.List == callpolicy.AllowList {
				out[k].Allow = append(out[k].Allow, e)
			} else {
				out[k].Block = append(out[k].Block, e)
			}
		}
		return rs.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return out, nil
}
