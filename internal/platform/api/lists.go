package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// entryInput is a list entry as clients send it; read-only fields are
// accepted and ignored so that exported entries can be imported again.
type entryInput struct {
	ID        int64              `json:"id"`
	PolicyID  string             `json:"policy_id"`
	List      string             `json:"list"`
	Calling   string             `json:"calling"`
	Called    string             `json:"called"`
	ExpiresAt *time.Time         `json:"expires_at"`
	Note      string             `json:"note"`
	Action    *callpolicy.Action `json:"action"`
	CreatedAt *time.Time         `json:"created_at"`
}

func (in *entryInput) entry(field, policyID string, list callpolicy.ListKind) (callpolicy.ListEntry, error) {
	if in.PolicyID != "" && in.PolicyID != policyID {
		return callpolicy.ListEntry{}, badRequest(field+"policy_id", "%spolicy_id: %q differs from policy %q in the path", field, in.PolicyID, policyID)
	}
	if in.List != "" && in.List != string(list) {
		return callpolicy.ListEntry{}, badRequest(field+"list", "%slist: %q differs from list %q in the path", field, in.List, list)
	}
	return callpolicy.ListEntry{
		PolicyID:  policyID,
		List:      list,
		Calling:   in.Calling,
		Called:    in.Called,
		ExpiresAt: in.ExpiresAt,
		Note:      in.Note,
		Action:    in.Action,
	}, nil
}

// listPath resolves {id} and {list}, answering 404 for an unknown policy or
// a list that is neither allow nor block.
func (s *server) listPath(r *http.Request) (string, callpolicy.ListKind, error) {
	pid := r.PathValue("id")
	list := callpolicy.ListKind(r.PathValue("list"))
	if list != callpolicy.AllowList && list != callpolicy.BlockList {
		return "", "", notFound("list %q not found: lists are %q and %q", list, callpolicy.AllowList, callpolicy.BlockList)
	}
	if err := s.policyExists(r, pid); err != nil {
		return "", "", err
	}
	return pid, list, nil
}

// wantsCSV decides the export format: ?format= wins over Accept.
func wantsCSV(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, badRequest("format", "format: %q is not a format; use csv or json", f)
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/csv") {
			return true, nil
		}
	}
	return false, nil
}

func (s *server) listEntries(w http.ResponseWriter, r *http.Request) {
	asCSV, err := wantsCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pid, list, err := s.listPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, err := s.store.ListEntries(r.Context(), pid, list)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeEntries(w, r, entries, asCSV, fmt.Sprintf("%s-%s.csv", pid, list))
}

// writeEntries answers with list entries, filtered by ?q= (a substring of
// the numbers or the note, any case), as JSON or as a CSV file.
func (s *server) writeEntries(w http.ResponseWriter, r *http.Request, entries []callpolicy.ListEntry, asCSV bool, filename string) {
	if q := strings.ToLower(r.URL.Query().Get("q")); q != "" {
		kept := entries[:0]
		for _, e := range entries {
			if strings.Contains(strings.ToLower(e.Calling), q) || strings.Contains(strings.ToLower(e.Called), q) || strings.Contains(strings.ToLower(e.Note), q) {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	if asCSV {
		var buf bytes.Buffer
		if err := callpolicy.WriteEntriesCSV(&buf, entries); err != nil {
			s.fail(w, r, fmt.Errorf("export %s: %w", filename, err))
			return
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, filename))
		_, _ = w.Write(buf.Bytes())
		return
	}
	if entries == nil {
		entries = []callpolicy.ListEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// addEntries takes CSV (Content-Type text/csv), one JSON entry or a JSON
// array. All entries are validated before any is stored, and the store adds
// them all or none.
func (s *server) addEntries(w http.ResponseWriter, r *http.Request) {
	pid, list, err := s.listPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, single, err := s.readEntries(w, r, list, func(i int, in *entryInput) (callpolicy.ListEntry, error) {
		field := ""
		if i >= 0 {
			field = fmt.Sprintf("entries[%d].", i)
		}
		return in.entry(field, pid, list)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i := range entries {
		entries[i].ID, entries[i].PolicyID, entries[i].List = 0, pid, list
	}
	if len(entries) == 0 {
		s.fail(w, r, badRequest("", "no entries in the request"))
		return
	}
	for i := range entries {
		if err := callpolicy.ValidateEntry(&entries[i]); err != nil {
			if !single {
				err = prefixField(fmt.Sprintf("entries[%d]", i), err)
			}
			s.fail(w, r, err)
			return
		}
	}
	if err := s.checkDirectories(r, &callpolicy.PolicyConfig{Block: entries}, !single); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.AddEntries(r.Context(), pid, list, entries); err != nil {
		s.fail(w, r, err)
		return
	}
	s.listsChanged(r, "add "+string(list)+" entries", pid, pid, "")
	if single {
		writeJSON(w, http.StatusCreated, entries[0])
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"entries": entries})
}

func (s *server) deleteEntry(w http.ResponseWriter, r *http.Request) {
	pid, list, err := s.listPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	raw := r.PathValue("entry")
	id, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil || id <= 0 {
		s.fail(w, r, notFound("entry %q not found: entry ids are positive integers", raw))
		return
	}
	if err := s.store.DeleteEntry(r.Context(), pid, list, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("entry %d not found in the %s list of policy %q", id, list, pid)
		}
		s.fail(w, r, err)
		return
	}
	s.listsChanged(r, "delete "+string(list)+" entry", strconv.FormatInt(id, 10), pid, "")
	w.WriteHeader(http.StatusNoContent)
}

// readEntries reads a body of list entries: CSV (text/csv), one JSON entry
// or a JSON array; conv turns a JSON entry into a ListEntry (i is its index
// in an array, -1 for a lone object). single reports a lone object.
func (s *server) readEntries(w http.ResponseWriter, r *http.Request, kind callpolicy.ListKind, conv func(i int, in *entryInput) (callpolicy.ListEntry, error)) ([]callpolicy.ListEntry, bool, error) {
	body, isCSV, err := readCSVOrJSON(w, r, maxBulkBodyBytes)
	if err != nil {
		return nil, false, err
	}
	switch {
	case isCSV:
		entries, err := callpolicy.ParseListCSV(bytes.NewReader(body), kind)
		if err != nil {
			return nil, false, badRequestFrom(err)
		}
		return entries, false, nil
	case bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("[")):
		var ins []entryInput
		if err := decodeJSONBytes(body, &ins); err != nil {
			return nil, false, err
		}
		entries := make([]callpolicy.ListEntry, len(ins))
		for i := range ins {
			if entries[i], err = conv(i, &ins[i]); err != nil {
				return nil, false, err
			}
		}
		return entries, false, nil
	default:
		var in entryInput
		if err := decodeJSONBytes(body, &in); err != nil {
			return nil, false, err
		}
		e, err := conv(-1, &in)
		if err != nil {
			return nil, false, err
		}
		return []callpolicy.ListEntry{e}, true, nil
	}
}

// readCSVOrJSON reads a body sent as text/csv or JSON (isCSV says which),
// refusing other content types with 415.
func readCSVOrJSON(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, isCSV bool, err error) {
	mt, err := mediaType(r)
	if err != nil {
		return nil, false, err
	}
	isCSV = mt == "text/csv"
	if !isCSV && !isJSONType(mt) {
		return nil, false, &apiError{Status: http.StatusUnsupportedMediaType,
			Msg: fmt.Sprintf("Content-Type %q is not accepted here; send application/json or text/csv", mt)}
	}
	body, err = readBody(w, r, limit)
	return body, isCSV, err
}
