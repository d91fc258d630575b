package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// directoryInput is a directory as clients send it; read-only fields are
// accepted and ignored so that a GET's answer can be PUT back.
type directoryInput struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	FallbackName string `json:"fallback_name"`
	Entries      *int64 `json:"entries"`
	Version      *int64 `json:"version"`
	CreatedAt    any    `json:"created_at"`
	UpdatedAt    any    `json:"updated_at"`
}

func (in *directoryInput) directory(id string) directory.Directory {
	return directory.Directory{ID: id, Name: in.Name, Description: in.Description, FallbackName: in.FallbackName}
}

func directoryErr(err error) error {
	var fe *directory.FieldError
	if errors.As(err, &fe) {
		return &apiError{Status: http.StatusBadRequest, Field: fe.Field, Msg: fe.Error()}
	}
	return err
}

func (s *server) listDirectories(w http.ResponseWriter, r *http.Request) {
	ds, err := s.store.ListDirectories(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"directories": ds})
}

func (s *server) getDirectory(w http.ResponseWriter, r *http.Request) {
	d, err := s.store.GetDirectory(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *server) createDirectory(w http.ResponseWriter, r *http.Request) {
	var in directoryInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	d := in.directory(in.ID)
	if err := directory.Validate(&d); err != nil {
		s.fail(w, r, directoryErr(err))
		return
	}
	if err := s.store.CreateDirectory(r.Context(), &d); err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = &apiError{Status: http.StatusConflict, Field: "id", Msg: fmt.Sprintf("directory %q already exists", d.ID)}
		}
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditDirectories, "create directory", d.ID)
	writeJSON(w, http.StatusCreated, d)
}

func (s *server) updateDirectory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in directoryInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.ID != "" && in.ID != id {
		s.fail(w, r, badRequest("id", "id: %q in the body differs from %q in the path; directories cannot be renamed", in.ID, id))
		return
	}
	d := in.directory(id)
	if err := directory.Validate(&d); err != nil {
		s.fail(w, r, directoryErr(err))
		return
	}
	if err := s.store.UpdateDirectory(r.Context(), &d); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditDirectories, "update directory", id)
	writeJSON(w, http.StatusOK, d)
}

func (s *server) deleteDirectory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.store.DeleteDirectory(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditDirectories, "delete directory", id)
	w.WriteHeader(http.StatusNoContent)
}

// listDirectoryEntries searches (number=, name=, after=, limit=) or, as
// CSV, exports the whole directory, streamed from one read snapshot.
func (s *server) listDirectoryEntries(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	asCSV, err := wantsCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	if asCSV {
		s.exportDirectory(w, r, id)
		return
	}
	dq := store.DirectoryQuery{Number: q.Get("number"), Name: q.Get("name")}
	if a := q.Get("after"); a != "" {
		// Paging: the last entry seen, as "after=<number>[&after_match=prefix]".
		dq.After = &directory.Key{Number: a, Prefix: q.Get("after_match") == directory.Prefix}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxCallQueryLimit {
			s.fail(w, r, badRequest("limit", "limit: %q is not a number from 1 to %d", v, store.MaxCallQueryLimit))
			return
		}
		dq.Limit = n
	}
	if dq.Number != "" {
		// A search by number uses the stored form: "+1 (972) 555" finds +1972555...
		if n, err := directory.NormalizeNumber(dq.Number); err == nil {
			dq.Number = n
		}
	}
	entries, err := s.store.SearchDirectoryEntries(r.Context(), id, dq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

func (s *server) exportDirectory(w http.ResponseWriter, r *http.Request, id string) {
	if _, err := s.store.GetDirectory(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="directory-%s.csv"`, id))
	bw := bufio.NewWriterSize(w, 64<<10)
	cw, err := directory.NewCSVWriter(bw)
	if err != nil {
		return
	}
	var e directory.Entry
	_, err = s.store.ScanDirectoryEntries(r.Context(), id, func(number, name string, prefix bool) error {
		e = directory.Entry{Number: number, Name: name, Match: kindOf(prefix)}
		return cw.Write(&e)
	})
	if err == nil {
		err = cw.Flush()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		// The header is out: the client sees a cut body, the log says why.
		s.log.Warn("directory export cut short", "directory", id, "err", err)
	}
}

func kindOf(prefix bool) string {
	if prefix {
		return directory.Prefix
	}
	return directory.Exact
}

// readDirectoryEntries decodes a body of entries: CSV (text/csv), one JSON
// entry or a JSON array. Every entry is cleaned; the error names the CSV
// line or the array index. single reports a lone JSON object.
func readDirectoryEntries(w http.ResponseWriter, r *http.Request) (entries []directory.Entry, st directory.ImportStats, single bool, err error) {
	body, isCSV, err := readCSVOrJSON(w, r, maxDirectoryBodyBytes)
	if err != nil {
		return nil, st, false, err
	}
	if isCSV {
		entries, st, err = directory.ParseCSV(bytes.NewReader(body), 0)
		if err != nil {
			return nil, st, false, badRequest("", "%s", err)
		}
		return entries, st, false, nil
	}
	if bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("[")) {
		if err := decodeJSONBytes(body, &entries); err != nil {
			return nil, st, false, err
		}
	} else {
		var e directory.Entry
		if err := decodeJSONBytes(body, &e); err != nil {
			return nil, st, false, err
		}
		entries, single = []directory.Entry{e}, true
	}
	seen := make(map[directory.Key]int, len(entries))
	for i := range entries {
		cut, err := entries[i].Clean()
		if err != nil {
			var fe *directory.FieldError
			errors.As(err, &fe)
			field := fmt.Sprintf("entries[%d].%s", i, fe.Field)
			if single {
				field = fe.Field
			}
			return nil, st, false, &apiError{Status: http.StatusBadRequest, Field: field, Msg: field + ": " + fe.Msg}
		}
		if cut {
			st.Cut++
		}
		k := directory.KeyOf(&entries[i])
		if j, dup := seen[k]; dup {
			return nil, st, false, badRequest(fmt.Sprintf("entries[%d].number", i), "entries[%d].number: %s entry %q is also entries[%d]", i, entries[i].Match, k.Number, j)
		}
		seen[k] = i
	}
	st.Entries = len(entries)
	return entries, st, single, nil
}

// maxDirectoryBodyBytes fits a million-entry directory as CSV (about 35
// bytes a line) with room to spare.
const maxDirectoryBodyBytes = 128 << 20

// addDirectoryEntries adds entries or renames those already there.
func (s *server) addDirectoryEntries(w http.ResponseWriter, r *http.Request) {
	s.writeDirectoryEntries(w, r, "add directory entries", s.store.PutDirectoryEntries)
}

// replaceDirectoryEntries makes the body the directory's whole content,
// writing only what differs from what is stored.
func (s *server) replaceDirectoryEntries(w http.ResponseWriter, r *http.Request) {
	s.writeDirectoryEntries(w, r, "replace directory entries", s.store.ReplaceDirectoryEntries)
}

func (s *server) writeDirectoryEntries(w http.ResponseWriter, r *http.Request, action string,
	write func(ctx context.Context, id string, entries []directory.Entry) (store.DirectoryChange, error)) {
	id := r.PathValue("id")
	entries, st, single, err := readDirectoryEntries(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if single && r.Method == http.MethodPut {
		s.fail(w, r, badRequest("", "replacing a directory takes CSV or a JSON array (send [] to empty it)"))
		return
	}
	if len(entries) == 0 && r.Method != http.MethodPut {
		s.fail(w, r, badRequest("", "no entries in the request"))
		return
	}
	ch, err := write(r.Context(), id, entries)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logChange(r, auditDirectories, action, id, "added", ch.Added, "changed", ch.Changed, "removed", ch.Removed)
	if ch.Added+ch.Changed+ch.Removed > 0 {
		s.directoryWritten(id, ch)
	}
	writeJSON(w, http.StatusOK, map[string]any{"directory": id, "read": st, "change": ch})
}

// deleteDirectoryEntry deletes one entry by number (?match=prefix for a
// prefix entry).
func (s *server) deleteDirectoryEntry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	num, err := directory.NormalizeNumber(r.PathValue("number"))
	if err != nil {
		s.fail(w, r, notFound("entry %q not found: %s", r.PathValue("number"), err))
		return
	}
	k := directory.Key{Number: num}
	switch m := r.URL.Query().Get("match"); m {
	case "", directory.Exact:
	case directory.Prefix:
		k.Prefix = true
	default:
		s.fail(w, r, badRequest("match", "match: %q is not exact or prefix", m))
		return
	}
	ch, err := s.store.DeleteDirectoryEntries(r.Context(), id, []directory.Key{k})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.logChange(r, auditDirectories, "delete directory entry", id+"/"+num)
	s.directoryWritten(id, ch)
	w.WriteHeader(http.StatusNoContent)
}

// directoryWritten tells the owner of the compiled policies that a
// directory's entries were written.
func (s *server) directoryWritten(id string, ch store.DirectoryChange) {
	switch {
	case s.cfg.Live != nil:
		s.cfg.Live.DirectoryChanged(id, ch)
	case s.cfg.OnChange != nil:
		s.cfg.OnChange(ChangedPolicies)
	}
}

// checkDirectories answers 400 when cfg names a directory that does not
// exist, naming the field, prefixed with its place in a bulk request
// ("rules[3].action.modify.calling_name", "entries[2].action...") when
// bulk, else the rule's, entry's or policy's own.
func (s *server) checkDirectories(r *http.Request, cfg *callpolicy.PolicyConfig, bulk bool) error {
	known := map[string]bool{}
	for _, ref := range callpolicy.DirectoryRefs(cfg) {
		if known[ref.ID] {
			continue
		}
		f := ref.Field
		switch {
		case bulk && ref.Rule >= 0:
			f = fmt.Sprintf("rules[%d].%s", ref.Rule, f)
		case bulk && ref.Entry >= 0:
			f = fmt.Sprintf("entries[%d].%s", ref.Entry, f)
		}
		if err := s.directoryExists(r, ref.ID, f); err != nil {
			return err
		}
		known[ref.ID] = true
	}
	return nil
}

// directoryExists answers 400 naming field when directory id does not exist.
func (s *server) directoryExists(r *http.Request, id, field string) error {
	_, err := s.store.GetDirectory(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest(field, "%s: directory %q does not exist", field, id)
	}
	return err
}
