package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// SiteReporter is this site's half of a two-site pair (internal/datadirector/site).
type SiteReporter interface {
	// State is what the peer site asks for every second: this site's own
	// feeds (not redacted), what runs here and where it delivered.
	State(ctx context.Context) (any, error)
}

// getSite answers the peer site; admin only, for the specs carry secrets.
func (s *server) getSite(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Site == nil {
		s.fail(w, r, &apiError{Status: http.StatusNotFound, Msg: "this node is not in a site pair (-site)"})
		return
	}
	if roleFrom(r.Context()) != RoleAdmin {
		s.fail(w, r, &apiError{Status: http.StatusForbidden, Msg: "the site state carries the feeds' secrets: admin role only"})
		return
	}
	st, err := s.cfg.Site.State(r.Context())
	if err != nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "site state: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// checkSiteOwner refuses a change, made at this site, to a feed the peer
// site runs: the peer's store is where it is kept, and mirrored from.
func (s *server) checkSiteOwner(old *director.FeedSpec) error {
	if s.cfg.SiteName == "" || old.Site == "" || old.Site == s.cfg.SiteName {
		return nil
	}
	return &apiError{Status: http.StatusConflict, Field: "site",
		Msg: fmt.Sprintf("feed %q is run by site %q and mirrored here: change it there", old.Name, old.Site)}
}

// placeFeed sets a new or changed feed's site: the site it is created at,
// and it cannot move.
func (s *server) placeFeed(spec *director.FeedSpec, old *director.FeedSpec) error {
	want := s.cfg.SiteName
	if old != nil {
		want = old.Site
		if want == "" {
			want = s.cfg.SiteName
		}
	}
	switch {
	case spec.Site == "" || spec.Site == want:
		spec.Site = want
		return nil
	case s.cfg.SiteName == "":
		return badRequest("site", "site: %q: this node is not in a site pair (-site)", spec.Site)
	case old != nil:
		return badRequest("site", "site: %q: a feed stays at the site it was created at (%q); delete it and create it at the other site", spec.Site, want)
	default:
		return badRequest("site", "site: %q: a feed is created at the site that runs it; this is site %q", spec.Site, want)
	}
}
