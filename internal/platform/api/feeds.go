package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// redacted replaces secrets in answers. A PUT that sends it back keeps the
// stored secret, so a fetched spec can be edited and sent back.
const redacted = "********"

// pathFeed is the feed runtime and the name of the stored feed the
// request's path names; false once the error is answered (no director, no
// such feed).
func (s *server) pathFeed(w http.ResponseWriter, r *http.Request) (FeedRuntime, string, bool) {
	name := r.PathValue("name")
	rt, err := s.feedRuntime()
	if err == nil {
		_, err = s.getFeedSpec(r, name)
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, "", false
	}
	return rt, name, true
}

func (s *server) feedRuntime() (FeedRuntime, error) {
	if s.cfg.Feeds == nil {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Msg: "the director is not running"}
	}
	return s.cfg.Feeds, nil
}

func decodeStoredSpec(rec store.FeedRecord) (director.FeedSpec, error) {
	var spec director.FeedSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return spec, fmt.Errorf("feed %q: stored spec: %w", rec.Name, err)
	}
	return spec, nil
}

// redact returns a copy of spec safe to show a viewer.
func redact(spec director.FeedSpec) director.FeedSpec {
	if spec.Kafka != nil && spec.Kafka.Password != "" {
		k := *spec.Kafka
		k.Password = redacted
		spec.Kafka = &k
	}
	return spec
}

func (s *server) getFeedSpec(r *http.Request, name string) (director.FeedSpec, error) {
	rec, err := s.store.GetFeed(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return director.FeedSpec{}, notFound("feed %q not found", name)
	}
	if err != nil {
		return director.FeedSpec{}, err
	}
	return decodeStoredSpec(rec)
}

func (s *server) listFeeds(w http.ResponseWriter, r *http.Request) {
	recs, err := s.store.ListFeeds(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	specs := make([]director.FeedSpec, 0, len(recs))
	for _, rec := range recs {
		spec, err := decodeStoredSpec(rec)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		specs = append(specs, redact(spec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"feeds": specs})
}

func (s *server) getFeed(w http.ResponseWriter, r *http.Request) {
	spec, err := s.getFeedSpec(r, r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, redact(spec))
}

// createFeed validates, prepares (so copies produced from now on are
// delivered), stores, and only then tells the runtime to start the feed.
func (s *server) createFeed(w http.ResponseWriter, r *http.Request) {
	var spec director.FeedSpec
	if err := decodeJSON(w, r, maxBodyBytes, &spec); err != nil {
		s.fail(w, r, err)
		return
	}
	rt, err := s.feedRuntime()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := director.CheckFeedName(spec.Name); err != nil {
		s.fail(w, r, badRequestFrom(err))
		return
	}
	if err := s.placeFeed(&spec, nil); err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Kafka != nil && spec.Kafka.Password == redacted {
		s.fail(w, r, badRequest("kafka.password", "kafka.password: send the password itself, not the redaction marker"))
		return
	}
	// Refuse a duplicate before Prepare touches the runtime.
	if _, err := s.store.GetFeed(r.Context(), spec.Name); err == nil {
		s.fail(w, r, &apiError{Status: http.StatusConflict, Field: "name", Msg: fmt.Sprintf("feed %q already exists", spec.Name)})
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, err)
		return
	}
	created := s.now().UTC().Truncate(time.Millisecond)
	spec.Created = &created
	if err := s.storeFeed(r, rt, &spec, true); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, redact(spec))
}

func (s *server) updateFeed(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var spec director.FeedSpec
	if err := decodeJSON(w, r, maxBodyBytes, &spec); err != nil {
		s.fail(w, r, err)
		return
	}
	rt, err := s.feedRuntime()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Name != "" && spec.Name != name {
		s.fail(w, r, badRequest("name", "name: %q in the body differs from %q in the path; feeds cannot be renamed", spec.Name, name))
		return
	}
	spec.Name = name
	old, err := s.getFeedSpec(r, name)
	if err == nil {
		err = s.checkSiteOwner(&old)
	}
	if err == nil {
		err = s.placeFeed(&spec, &old)
	}
	spec.Created = old.Created
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if spec.Kafka != nil && spec.Kafka.Password == redacted {
		if old.Kafka == nil {
			s.fail(w, r, badRequest("kafka.password", "kafka.password: no stored password to keep; send the password itself"))
			return
		}
		spec.Kafka.Password = old.Kafka.Password
	}
	if err := s.storeFeed(r, rt, &spec, false); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, redact(spec))
}

// storeFeed is the common tail of create and update.
func (s *server) storeFeed(r *http.Request, rt FeedRuntime, spec *director.FeedSpec, create bool) error {
	if err := rt.Validate(spec); err != nil {
		var fe *director.FieldError
		if errors.As(err, &fe) {
			return err
		}
		// Validation failures are FieldErrors; anything else means the
		// runtime cannot judge the spec now (the director is off, say).
		return &apiError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("feed %q: %v", spec.Name, err)}
	}
	// Only a new feed is prepared: preparing positions the consumer group,
	// which for a running feed would skip its undelivered backlog. The
	// runtime positions sources added by an update itself.
	if create {
		if err := rt.Prepare(r.Context(), spec); err != nil {
			var fe *director.FieldError
			if errors.As(err, &fe) {
				return err
			}
			// The spec is valid but the runtime could not set it up
			// (Kafka unreachable, say): nothing is stored; retry later.
			s.log.Warn("api feed prepare failed", "feed", spec.Name, "err", err)
			return &apiError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf("feed %q: preparing consumer positions: %v", spec.Name, err)}
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("feed %q: encode spec: %w", spec.Name, err)
	}
	rec := store.FeedRecord{Name: spec.Name, Spec: raw}
	action := "update feed"
	if create {
		action = "create feed"
		err = s.store.CreateFeed(r.Context(), &rec)
		if errors.Is(err, store.ErrConflict) {
			return &apiError{Status: http.StatusConflict, Field: "name", Msg: fmt.Sprintf("feed %q already exists", spec.Name)}
		}
	} else {
		err = s.store.UpdateFeed(r.Context(), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("feed %q not found", spec.Name)
		}
	}
	if err != nil {
		return err
	}
	s.changed(r, ChangedFeeds, action, spec.Name)
	return nil
}

func (s *server) deleteFeed(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if old, err := s.getFeedSpec(r, name); err == nil {
		if err := s.checkSiteOwner(&old); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := s.store.DeleteFeed(r.Context(), name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound("feed %q not found", name)
		}
		s.fail(w, r, err)
		return
	}
	s.changed(r, ChangedFeeds, "delete feed", name)
	w.WriteHeader(http.StatusNoContent)
}

// feedStatus reports the runtime state of a stored feed; a stored feed the
// runtime does not run (disabled, or not started yet) says so.
func (s *server) feedStatus(w http.ResponseWriter, r *http.Request) {
	rt, name, ok := s.pathFeed(w, r)
	if !ok {
		return
	}
	st, ok := rt.Status(name)
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "running": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "running": true, "status": st})
}
