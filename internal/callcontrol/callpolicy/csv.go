package callpolicy

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxCSVEntries bounds one import, so a huge upload fails cleanly instead
// of exhausting memory.
const MaxCSVEntries = 1_000_000

var csvHeader = []string{"calling", "called", "expires_at", "note", "action"}

// ParseEntriesCSV reads list entries as CSV with the columns
// calling,called,expires_at,note,action. The header line is optional;
// trailing columns may be omitted; expires_at is RFC 3339 or empty; action
// is the entry's own action as JSON ({"decision":"divert","destination":
// "8000"}) or empty for the list's. Every entry is
// validated, and the error names the line of the first bad one:
// "line 7: calling: ...". Id, policy and list are left for the caller.
func ParseEntriesCSV(r io.Reader) ([]ListEntry, error) { return ParseListCSV(r, BlockList) }

// ParseListCSV is ParseEntriesCSV for a list of kind: a group's entries
// are checked as group entries (ValidateSharedEntry).
func ParseListCSV(r io.Reader, kind ListKind) ([]ListEntry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	var out []ListEntry
	first := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %v", pe.Line, pe.Err)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if len(rec) > 0 && strings.EqualFold(strings.TrimSpace(rec[0]), "calling") {
				continue
			}
		}
		if len(rec) > len(csvHeader) {
			return nil, fmt.Errorf("line %d: %d columns, want at most %d (%s)", line, len(rec), len(csvHeader), strings.Join(csvHeader, ","))
		}
		col := func(i int) string {
			if i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		e := ListEntry{Calling: col(0), Called: col(1), Note: col(3)}
		if s := col(2); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return nil, fmt.Errorf("line %d: expires_at: %q is not RFC 3339 (e.g. 2026-12-31T23:59:59Z)", line, s)
			}
			e.ExpiresAt = &t
		}
		if s := col(4); s != "" {
			dec := json.NewDecoder(strings.NewReader(s))
			dec.DisallowUnknownFields()
			e.Action = new(Action)
			if err := dec.Decode(e.Action); err != nil {
				return nil, fmt.Errorf("line %d: action: not a JSON action (%v)", line, err)
			}
		}
		if err := ValidateSharedEntry(kind, &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if len(out) >= MaxCSVEntries {
			return nil, fmt.Errorf("line %d: more than %d entries", line, MaxCSVEntries)
		}
		out = append(out, e)
	}
}

// WriteEntriesCSV writes entries with a header line, in the format
// ParseEntriesCSV reads. Expiry is written in RFC 3339 (UTC).
func WriteEntriesCSV(w io.Writer, entries []ListEntry) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	rec := make([]string, len(csvHeader))
	for i := range entries {
		e := &entries[i]
		exp := ""
		if e.ExpiresAt != nil {
			exp = e.ExpiresAt.UTC().Format(time.RFC3339)
		}
		act := ""
		if e.Action != nil {
			b, err := json.Marshal(e.Action)
			if err != nil {
				return err
			}
			act = string(b)
		}
		rec[0], rec[1], rec[2], rec[3], rec[4] = e.Calling, e.Called, exp, e.Note, act
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
