package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/site"
	"github.com/signalbox/signalbox/internal/platform/api"
	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/platform/obs"
)

// mirroredTopics are the topics the peer site's copies are mirrored into
// here: one per NF topic, with its partitions (none without -site).
func (s *Server) mirroredTopics(nf []broker.TopicSpec) []broker.TopicSpec {
	if s.cfg.Site == "" {
		return nil
	}
	out := make([]broker.TopicSpec, len(nf))
	for i, t := range nf {
		out[i] = broker.TopicSpec{Name: site.MirroredTopic(s.cfg.PeerSite, t.Name), Partitions: t.Partitions}
	}
	return out
}

// startSite starts the two-site parts: the mirror of this site's copies into
// the peer's Kafka and the pair that watches the peer and places the feeds.
func (d *directorParts) startSite(nf []broker.TopicSpec) error {
	cfg := d.s.cfg
	peerKafka := d.client
	peerKafka.Brokers = config.SplitList(cfg.PeerKafkaBrokers)
	if d.broker != nil {
		// Our embedded broker's settings say nothing of the peer's
		// limits: its broker decides what is too large. The peer's
		// embedded broker knows this site as its site user.
		peerKafka.MaxMessageBytes = 0
		peerKafkaAuth(cfg, &peerKafka)
	}
	d.mirror = site.NewMirror(site.MirrorConfig{Site: cfg.Site, Peer: cfg.PeerSite, Local: d.client, Remote: peerKafka,
		Topics: nf, Registerer: d.s.reg, Logger: d.s.log})
	pair, closePair, err := site.NewPair(site.PairConfig{Site: cfg.Site, Peer: cfg.PeerSite, PeerURL: cfg.PeerURL,
		PeerToken: cfg.PeerToken, Takeover: cfg.SiteTakeover, Store: d.s.store, Feeds: d.mgr, Kafka: d.client,
		Mirror: d.mirror, Topics: nf, OnChange: func() { d.s.changed(api.ChangedFeeds) },
		HandbackFile: filepath.Join(cfg.DataDir, "site-handback.json"),
		Registerer:   d.s.reg, Logger: d.s.log})
	if err != nil {
		return err
	}
	d.pair = pair
	d.s.parts.closer("site pair store", closePair)
	d.s.parts.loop("site mirror", d.mirror.Run)
	d.s.parts.loop("site pair", pair.Run)
	d.s.log.Info("two-site redundancy", "site", cfg.Site, "peer", cfg.PeerSite, "peer_url", cfg.PeerURL,
		"peer_kafka", cfg.PeerKafkaBrokers, "takeover", cfg.SiteTakeover)
	return nil
}

// siteState answers the peer site (GET /api/v1/site); nil without -site.
func (s *Server) siteState() api.SiteReporter {
	if s.dir == nil || s.dir.pair == nil {
		return nil
	}
	return siteReporter{s.dir.pair}
}

type siteReporter struct{ p *site.Pair }

func (r siteReporter) State(ctx context.Context) (any, error) { return r.p.State(ctx) }

// checkSite raises site_peer_unreachable while the peer site has not
// answered for 5 s (saying whether this site took its feeds over), and
// site_mirror_failing while copies are not reaching the peer's Kafka.
func (s *Server) checkSite(now time.Time) {
	if s.dir == nil || s.dir.pair == nil {
		return
	}
	peer := s.dir.pair.Peer()
	if down, since, why, taken := s.dir.pair.PeerDown(); down && now.Sub(since) >= 5*time.Second {
		what := "this site runs only its own feeds until -site-takeover passes"
		if taken {
			what = "this site runs the peer's feeds too"
		}
		s.alarms.Raise(alarmSitePeer, "site/"+peer, obs.Major,
			fmt.Sprintf("peer site %s has not answered for %s (%v): %s", peer, now.Sub(since).Round(time.Second), why, what))
	} else if !down {
		s.alarms.Clear(alarmSitePeer, "site/"+peer)
	}
	waiting := s.dir.pair.Waiting()
	for name, since := range waiting {
		what := "it waits for them"
		if now.Sub(since) >= site.HandBackWait {
			what = fmt.Sprintf("it started after %s without them, delivering again what it could not place", site.HandBackWait)
		}
		s.alarms.Raise(alarmSitePositions, "feed/"+name, obs.Major,
			fmt.Sprintf("peer site %s handed feed %s back, but where it stopped is not known here yet (its copies are not all mirrored, or its Kafka cannot be read): %s", peer, name, what))
	}
	for _, a := range s.alarms.Active() {
		if _, ok := waiting[strings.TrimPrefix(a.Source, "feed/")]; a.Kind == alarmSitePositions && !ok {
			s.alarms.Clear(alarmSitePositions, a.Source)
		}
	}
	if err := s.dir.mirror.LastError(); err != nil {
		s.alarms.Raise(alarmSiteMirror, "site/"+peer, obs.Major,
			fmt.Sprintf("copies are not mirrored into peer site %s's Kafka: %v", peer, err))
	} else {
		s.alarms.Clear(alarmSiteMirror, "site/"+peer)
	}
}
