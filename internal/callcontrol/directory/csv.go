package directory

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
)

// CSV columns: number,name[,match]. The header line is optional. The
// column names of pgiralt/ucm_name_lookup's phone_directory.csv
// (phone_number,display_name,match_type) are read too, in any order, so a
// directory kept for that server imports as it is.
var csvColumns = map[string]int{
	"number": 0, "phone_number": 0,
	"name": 1, "display_name": 1,
	"match": 2, "match_type": 2,
}

// ImportStats says what an import read.
type ImportStats struct {
	Entries int `json:"entries"`
	// Cut counts names shortened to MaxNameLen bytes.
	Cut int `json:"names_cut"`
}

// ParseCSV reads a directory as CSV. Every entry is cleaned (Entry.Clean);
// the error names the line of the first bad one ("line 7: number: ..."),
// including a number listed twice. At most max entries are read (0:
// MaxEntries).
func ParseCSV(r io.Reader, max int) ([]Entry, ImportStats, error) {
	if max <= 0 || max > MaxEntries {
		max = MaxEntries
	}
	var st ImportStats
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cols := [3]int{0, 1, 2} // record index of number, name, match
	var out []Entry
	seen := map[Key]int32{}
	first := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			st.Entries = len(out)
			return out, st, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, st, fmt.Errorf("line %d: %v", pe.Line, pe.Err)
			}
			return nil, st, err
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			if h, ok, err := header(rec); err != nil {
				return nil, st, fmt.Errorf("line %d: %w", line, err)
			} else if ok {
				cols = h
				continue
			}
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank line
		}
		if len(rec) > 3 && cols == [3]int{0, 1, 2} {
			return nil, st, fmt.Errorf("line %d: %d columns, want number,name[,match]", line, len(rec))
		}
		col := func(i int) string {
			if i >= 0 && i < len(rec) {
				return rec[i]
			}
			return ""
		}
		e := Entry{Number: col(cols[0]), Name: col(cols[1]), Match: col(cols[2])}
		cut, err := e.Clean()
		if err != nil {
			return nil, st, fmt.Errorf("line %d: %w", line, err)
		}
		if cut {
			st.Cut++
		}
		k := KeyOf(&e)
		if prev, dup := seen[k]; dup {
			return nil, st, fmt.Errorf("line %d: number: %s entry %q already on line %d", line, e.Match, e.Number, prev)
		}
		seen[k] = int32(line)
		if len(out) >= max {
			return nil, st, fmt.Errorf("line %d: more than %d entries", line, max)
		}
		out = append(out, e)
		if len(out)%4096 == 0 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
	}
}

// header recognises a header line, returning where each column is.
func header(rec []string) (cols [3]int, ok bool, err error) {
	if len(rec) == 0 {
		return cols, false, nil
	}
	if _, known := csvColumns[strings.ToLower(strings.TrimSpace(rec[0]))]; !known {
		return cols, false, nil
	}
	cols = [3]int{-1, -1, -1}
	for i, h := range rec {
		c, known := csvColumns[strings.ToLower(strings.TrimSpace(h))]
		if !known {
			return cols, false, fmt.Errorf("column %q: want number, name and optionally match", h)
		}
		cols[c] = i
	}
	if cols[0] < 0 || cols[1] < 0 {
		return cols, false, fmt.Errorf("header needs a number and a name column")
	}
	return cols, true, nil
}

// CSVWriter writes entries as number,name,match with a header line.
type CSVWriter struct {
	w   *csv.Writer
	rec [3]string
}

// NewCSVWriter writes the header and returns the writer.
func NewCSVWriter(w io.Writer) (*CSVWriter, error) {
	cw := &CSVWriter{w: csv.NewWriter(w)}
	return cw, cw.w.Write([]string{"number", "name", "match"})
}

// Write writes one entry.
func (c *CSVWriter) Write(e *Entry) error {
	c.rec = [3]string{e.Number, e.Name, e.Match}
	if c.rec[2] == "" {
		c.rec[2] = Exact
	}
	return c.w.Write(c.rec[:])
}

// Flush flushes and returns the first write error.
func (c *CSVWriter) Flush() error {
	c.w.Flush()
	return c.w.Error()
}
