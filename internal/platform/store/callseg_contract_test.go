package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/store/callseg"
)

// testCallSegments checks search and retention across many segments whose
// time ranges overlap (several nodes, or a writer's batches interleaving)
// against a naive filter-and-sort of every record.
func testCallSegments(t *testing.T, h backendHarness) {
	s := openT(t, h.fresh(t))
	r := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 24 {
		batch := make([]CallRecord, 1+r.IntN(400))
		for j := range batch {
			num := func() string { return fmt.Sprintf("+4930%04d", r.IntN(50)) }
			batch[j] = CallRecord{Time: base.Add(time.Duration(i)*time.Minute + time.Duration(r.Int64N(int64(10*time.Minute)))),
				Policy: []string{"default", "sales", "ü-policy"}[r.IntN(3)], Calling: num(), Called: num(),
				TransformedCalling: num()[:r.IntN(2)*9], TransformedCalled: num(), RuleID: int64(j),
				Decision: []string{"permit", "deny", "divert", "indeterminate", "weird"}[r.IntN(5)]}
		}
		if err := s.InsertCalls(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// A quiet stretch: many one-call segments, more than one search page.
	for i := range 300 {
		c := CallRecord{Time: base.Add(time.Duration(r.Int64N(int64(34 * time.Minute)))), Policy: "default",
			Calling: fmt.Sprintf("+4930%04d", r.IntN(50)), Called: "+4940", Decision: "permit", RuleID: int64(i)}
		if err := s.InsertCalls(ctx, []CallRecord{c}); err != nil {
			t.Fatal(err)
		}
	}
	// IDs come from the store: read everything back once.
	all, err := s.SearchCalls(ctx, CallQuery{Limit: MaxCallQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	naive := func(q CallQuery) []CallRecord {
		limit := q.Limit
		if limit == 0 {
			limit = DefaultCallQueryLimit
		}
		var out []CallRecord
		for _, c := range all {
			if (q.Number == "" || q.Number == c.Calling || q.Number == c.Called || q.Number == c.TransformedCalling ||
				q.Number == c.TransformedCalled) && (q.Decision == "" || q.Decision == c.Decision) &&
				(q.Policy == "" || q.Policy == c.Policy) && (q.Since.IsZero() || !c.Time.Before(q.Since)) &&
				(q.Until.IsZero() || c.Time.Before(q.Until)) {
				out = append(out, c)
			}
		}
		sort.Slice(out, func(i, j int) bool { return callseg.Newer(&out[i], &out[j]) })
		return out[:min(len(out), limit)]
	}
	seen := map[int64]bool{}
	for i, c := range all {
		if seen[c.ID] {
			t.Fatalf("duplicate id %d", c.ID)
		}
		seen[c.ID] = true
		if i > 0 && callseg.Newer(&c, &all[i-1]) {
			t.Fatalf("record %d is newer than the one before it", i)
		}
	}
	for i := range 200 {
		q := CallQuery{Limit: []int{0, 1, 7, 100, 3000}[r.IntN(5)]}
		if r.IntN(2) == 0 {
			q.Number = fmt.Sprintf("+4930%04d", r.IntN(55))
		}
		if r.IntN(3) == 0 {
			q.Decision = []string{"permit", "deny", "divert", "indeterminate", "weird", "nope"}[r.IntN(6)]
		}
		if r.IntN(3) == 0 {
			q.Policy = []string{"default", "sales", "ü-policy"}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			q.Since = base.Add(time.Duration(r.Int64N(int64(34 * time.Minute))))
		}
		if r.IntN(2) == 0 {
			q.Until = base.Add(time.Duration(r.Int64N(int64(34 * time.Minute))))
		}
		got, err := s.SearchCalls(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := naive(q)
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("query %d %+v: %d records, want %d", i, q, len(got), len(want))
		}
	}

	// retention by age then by rows, against the same oracle
	cut := base.Add(17 * time.Minute)
	var older int
	for _, c := range all {
		if c.Time.Before(cut) {
			older++
		}
	}
	n, err := s.PruneCalls(ctx, cut, 0)
	if err != nil || n != int64(older) {
		t.Fatalf("prune by age: %d, %v; want %d", n, err, older)
	}
	rest, _ := s.SearchCalls(ctx, CallQuery{Limit: MaxCallQueryLimit})
	if want := naive(CallQuery{Since: cut, Limit: MaxCallQueryLimit}); !reflect.DeepEqual(rest, want) {
		t.Fatalf("after the age cut: %d records, want %d", len(rest), len(want))
	}
	keep := len(rest) / 3
	n, err = s.PruneCalls(ctx, time.Time{}, int64(keep))
	if err != nil || n != int64(len(rest)-keep) {
		t.Fatalf("prune by rows: %d, %v; want %d", n, err, len(rest)-keep)
	}
	left, _ := s.SearchCalls(ctx, CallQuery{Limit: MaxCallQueryLimit})
	if len(left) != keep {
		t.Fatalf("kept %d records, want %d", len(left), keep)
	}
	// Segments are cut in the order of their newest record, so what is left
	// is every record of the newest segments plus part of one more; all of
	// it must be records that were there before.
	for _, c := range left {
		if !seen[c.ID] {
			t.Fatalf("record %d appeared from nowhere", c.ID)
		}
	}
}
