package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/callcontrol/directory"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// sharedInput is a shared list as clients send it; read-only fields are
// accepted and ignored so that a GET's answer can be PUT back.
type sharedInput struct {
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Kind        string             `json:"kind"`
	Policies    []string           `json:"policies"`
	Action      *callpolicy.Action `json:"action"`
	Entries     *int64             `json:"entries"`
	Version     *int64             `json:"version"`
	CreatedAt   *time.Time         `json:"created_at"`
	UpdatedAt   *time.Time         `json:"updated_at"`
}

func (in *sharedInput) list(id string) callpolicy.SharedList {
	return callpolicy.SharedList{ID: id, Name: in.Name, Description: in.Description, Kind: callpolicy.ListKind(in.Kind),
		Policies: in.Policies, Action: in.Action}
}

func (s *server) listSharedLists(w http.ResponseWriter, r *http.Request) {
	ls, err := s.store.ListSharedLists(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"lists": ls})
}

func (s *server) getSharedList(w http.ResponseWriter, r *http.Request) {
	l, err := s.store.GetSharedList(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// checkShared validates a shared list and what it names: the policies it
// applies to and a directory its action reads.
func (s *server) checkShared(r *http.Request, l *callpolicy.SharedList) error {
	if err := callpolicy.ValidateSharedList(l); err != nil {
		return err
	}
	for i, p := range l.Policies {
		if err := s.policyExists(r, p); err != nil {
			f := fmt.Sprintf("policies[%d]", i)
			return badRequest(f, "%s: policy %q does not exist", f, p)
		}
	}
	if a := l.Action; a != nil && a.Modify != nil {
		if id := directory.RefID(a.Modify.CallingName); id != "" {
			return s.directoryExists(r, id, "action.modify.calling_name")
		}
	}
	return nil
}

func (s *server) createSharedList(w http.ResponseWriter, r *http.Request) {
	var in sharedInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	l := in.list(in.ID)
	if err := s.checkShared(r, &l); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.CreateSharedList(r.Context(), &l); err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = &apiError{Status: http.StatusConflict, Field: "id", Msg: fmt.Sprintf("shared list %q already exists", l.ID)}
		}
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditLists, "create shared list", l.ID)
	writeJSON(w, http.StatusCreated, l)
}

func (s *server) updateSharedList(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in sharedInput
	if err := decodeJSON(w, r, maxBodyBytes, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.ID != "" && in.ID != id {
		s.fail(w, r, badRequest("id", "id: %q in the body differs from %q in the path; lists cannot be renamed", in.ID, id))
		return
	}
	old, err := s.store.GetSharedList(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if in.Kind == "" {
		in.Kind = string(old.Kind)
	}
	l := in.list(id)
	if l.Kind != old.Kind {
		s.fail(w, r, badRequest("kind", "kind: shared list %q is a %s list; its kind cannot change", id, old.Kind))
		return
	}
	if err := s.checkShared(r, &l); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.UpdateSharedList(r.Context(), &l); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditLists, "update shared list", id)
	writeJSON(w, http.StatusOK, l)
}

func (s *server) deleteSharedList(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.store.DeleteSharedList(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.changedAs(r, ChangedPolicies, auditLists, "delete shared list", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) listSharedEntries(w http.ResponseWriter, r *http.Request) {
	asCSV, err := wantsCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	entries, err := s.store.ListSharedEntries(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeEntries(w, r, entries, asCSV, "list-"+id+".csv")
}

// addSharedEntries takes CSV, one JSON entry or a JSON array, like a
// policy's lists. Entries of a group are checked as the group will be
// compiled: a missing nested group or a loop is refused, naming it.
func (s *server) addSharedEntries(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	l, err := s.store.GetSharedList(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entries, single, err := s.readEntries(w, r, l.Kind, func(i int, in *entryInput) (callpolicy.ListEntry, error) {
		return callpolicy.ListEntry{Calling: in.Calling, Called: in.Called, ExpiresAt: in.ExpiresAt, Note: in.Note, Action: in.Action}, nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i := range entries {
		entries[i].ID, entries[i].PolicyID, entries[i].ListID = 0, "", id
		if err := callpolicy.ValidateSharedEntry(l.Kind, &entries[i]); err != nil {
			if !single {
				err = prefixField(fmt.Sprintf("entries[%d]", i), err)
			}
			s.fail(w, r, err)
			return
		}
	}
	if len(entries) == 0 {
		s.fail(w, r, badRequest("", "no entries in the request"))
		return
	}
	if err := s.checkDirectories(r, &callpolicy.PolicyConfig{Block: entries}, !single); err != nil {
		s.fail(w, r, err)
		return
	}
	if l.Kind == callpolicy.GroupList {
		if _, err := s.trialGroups(r.Context(), id, entries); err != nil {
			s.fail(w, r, badRequest("calling", "%s", err))
			return
		}
	}
	if err := s.store.AddSharedEntries(r.Context(), id, entries); err != nil {
		s.fail(w, r, err)
		return
	}
	s.listsChanged(r, "add shared list entries", id, "", id)
	if single {
		writeJSON(w, http.StatusCreated, entries[0])
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"entries": entries})
}

func (s *server) deleteSharedEntry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	raw := r.PathValue("entry")
	eid, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil || eid <= 0 {
		s.fail(w, r, notFound("entry %q not found: entry ids are positive integers", raw))
		return
	}
	if err := s.store.DeleteSharedEntry(r.Context(), id, eid); err != nil {
		s.fail(w, r, err)
		return
	}
	s.listsChanged(r, "delete shared list entry", strconv.FormatInt(eid, 10), "", id)
	w.WriteHeader(http.StatusNoContent)
}

// trialGroups compiles every stored group, with extra entries added to
// group id, as a snapshot would: a missing nested group, a loop or a group
// too large is an error.
func (s *server) trialGroups(ctx context.Context, id string, extra []callpolicy.ListEntry) (*callpolicy.Library, error) {
	ls, err := s.store.ListSharedLists(ctx)
	if err != nil {
		return nil, err
	}
	var lists []*callpolicy.CompiledList
	for _, l := range ls {
		if l.Kind != callpolicy.GroupList {
			continue
		}
		cfg, err := s.store.LoadSharedList(ctx, l.ID)
		if err != nil {
			return nil, err
		}
		if l.ID == id {
			cfg.Entries = append(cfg.Entries, extra...)
		}
		c, err := callpolicy.CompileSharedList(&cfg)
		if err != nil {
			return nil, err
		}
		lists = append(lists, c)
	}
	return callpolicy.NewLibrary(nil, lists)
}

// checkGroupRefs answers 400 when rules name a group that does not exist
// or whose numbers multiply past what one rule may expand to; field names
// as checkDirectories.
func (s *server) checkGroupRefs(r *http.Request, rules []callpolicy.Rule, bulk bool) error {
	var lib *callpolicy.Library
	for i := range rules {
		refs := callpolicy.GroupRefs(&rules[i])
		if len(refs) == 0 {
			continue
		}
		if lib == nil {
			var err error
			if lib, err = s.trialGroups(r.Context(), "", nil); err != nil {
				return err
			}
		}
		rows := 1
		for _, ref := range refs {
			f := ref[0]
			if bulk {
				f = fmt.Sprintf("rules[%d].%s", i, f)
			}
			vals := lib.Group(ref[1])
			if vals == nil {
				return badRequest(f, "%s: group %q does not exist (a shared list of kind group)", f, ref[1])
			}
			if len(vals) == 0 {
				return badRequest(f, "%s: group %q is empty", f, ref[1])
			}
			if rows *= len(vals); rows > callpolicy.MaxRuleRows {
				return badRequest(f, "%s: the rule's groups combine to more than %d numbers", f, callpolicy.MaxRuleRows)
			}
		}
	}
	return nil
}
