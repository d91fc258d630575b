package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/platform/store"
)

// State is what a site tells its peer (GET /api/v1/site, admin only: the
// feed specs are not redacted, the peer stores them as they are).
type State struct {
	Site string `json:"site"`
	// Feeds are the feeds this site owns, with their secrets.
	Feeds []director.FeedSpec `json:"feeds"`
	// Running are the feeds this site runs now: its own, and the peer's
	// while it has taken them over.
	Running []string `json:"running"`
	// TakenOver is true while this site runs the peer's feeds.
	TakenOver bool `json:"taken_over"`
	// Released are the peer's feeds this site ran and has stopped; their
	// progress is final, and the peer starts them from it.
	Released []string `json:"released"`
	// Progress is where each running or released feed has delivered, in
	// the terms of the peer's Kafka.
	Progress map[string][]Position `json:"progress,omitempty"`
}

// Position is a feed's consumer group position on one partition, as the
// receiving site commits it. With Mirror, Offset is in the reporting site's
// mirrored copy of the receiver's Topic, and the receiver's mirror
// translates it; without, it is an offset of the receiver's Topic.
type Position struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Mirror    bool   `json:"mirror,omitempty"`
	// Pending marks a released feed's position the reporting site cannot
	// yet give exactly: copies it delivered are not all mirrored into the
	// receiver's Kafka yet. The receiver waits for it (HandBackWait).
	Pending bool `json:"pending,omitempty"`
}

// HandBackWait bounds how long a site whose peer released its feed waits
// for exact positions (Position.Pending) before it starts the feed from
// what it has, delivering again what it cannot place.
const HandBackWait = 60 * time.Second

// Runtime is the director's feed manager as the pair needs it.
type Runtime interface {
	Status(name string) (director.FeedStatus, bool)
	Groups(spec *director.FeedSpec) []string
}

// PairConfig configures a Pair.
type PairConfig struct {
	Site, Peer string
	PeerURL    string // the peer's API base
	PeerToken  string // an admin token of the peer's API
	Takeover   time.Duration
	Store      store.Store
	Feeds      Runtime
	Kafka      broker.ClientConfig // this site's Kafka
	Mirror     *Mirror
	Topics     []broker.TopicSpec // this site's NF topics
	// OnChange is called when what this site runs changed (a takeover, a
	// hand-back, feeds mirrored into the store): apply the feeds again.
	OnChange func()
	// HandbackFile keeps, across a restart, the peer's feeds this site ran
	// and has not handed back yet ("" keeps them in memory only).
	HandbackFile string
	HTTP         *http.Client
	Registerer   prometheus.Registerer
	Logger       *slog.Logger
}

// Pair is one site's half of the pair: it asks the peer for its state every
// second, mirrors the peer's feeds into the store, keeps their consumer
// groups where the peer delivered, decides which feeds run here (Place), and
// answers the peer (State).
type Pair struct {
	cfg  PairConfig
	log  *slog.Logger
	adm  *kadm.Client
	nf   map[string]bool // this site's NF topics
	poll time.Duration

	mu          sync.Mutex
	started     time.Time
	lastContact time.Time
	contacted   bool
	peer        *State // the peer's last answer
	peerErr     error  // why the last question failed; nil when answered
	takenOver   bool
	released    map[string]bool       // the peer's feeds this site stopped, until the peer runs them
	committed   map[string]int64      // shadow commits made, by group/topic/partition
	conflicts   map[string]bool       // feeds of the peer whose name this site's own feed has
	placed      map[string]bool       // what Place decided last, by feed, to see a change
	waiting     map[string]time.Time  // own feeds the peer released, waiting since for exact positions
	final       map[string][]Position // exact final positions of feeds this site released

	up, taken  prometheus.Gauge
	pending    prometheus.Gauge
	peerErrors prometheus.Counter
	shadowed   prometheus.Counter
}

// NewPair connects to this site's Kafka; Run runs the pair.
func NewPair(cfg PairConfig) (*Pair, func(), error) {
	cl, err := cfg.Kafka.NewClient()
	if err != nil {
		return nil, nil, err
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 2 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pair{cfg: cfg, log: cfg.Logger, adm: kadm.NewClient(cl), nf: map[string]bool{},
		poll: min(time.Second, cfg.Takeover/5), started: time.Now(),
		released: map[string]bool{}, committed: map[string]int64{}, conflicts: map[string]bool{},
		waiting: map[string]time.Time{}, final: map[string][]Position{},
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_site_peer_up",
			Help: "1 while the peer site answers (GET /api/v1/site every second)."}),
		taken: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_site_takeover",
			Help: "1 while this site runs the peer site's feeds, the peer having not answered for -site-takeover."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_site_positions_pending",
			Help: "Feeds of this site the peer site handed back whose positions are not yet known exactly here: they wait (at most 60 s) rather than deliver again."}),
		peerErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_site_peer_errors_total",
			Help: "Requests to the peer site that failed (unreachable, refused, or an answer that is not the peer's)."}),
		shadowed: prometheus.NewCounter(prometheus.CounterOpts{Name: "signalbox_site_positions_committed_total",
			Help: "Consumer group positions of feeds the peer site runs, committed here where the peer delivered."}),
	}
	for _, t := range cfg.Topics {
		p.nf[t.Name] = true
	}
	p.loadReleased()
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(p.up, p.taken, p.pending, p.peerErrors, p.shadowed)
	}
	return p, cl.Close, nil
}

// Run asks the peer every second until ctx ends.
func (p *Pair) Run(ctx context.Context) {
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		p.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pair) step(ctx context.Context) {
	st, err := p.fetch(ctx)
	now := time.Now()
	changed := false
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		p.peerErrors.Inc()
		p.up.Set(0)
		p.mu.Lock()
		p.peerErr = err
		since := p.lastContact
		if !p.contacted {
			since = p.started
		}
		if !p.takenOver && now.Sub(since) >= p.cfg.Takeover {
			p.takenOver, changed = true, true
			p.taken.Set(1)
			p.log.Warn("peer site has not answered: this site runs its feeds", "peer", p.cfg.Peer, "for", now.Sub(since).Round(time.Second), "err", err)
		}
		p.mu.Unlock()
		if changed { // taken over just now: it owes the peer where it stops
			if specs, _, err := p.storedSpecs(ctx); err == nil {
				p.mu.Lock()
				p.owe(specs)
				p.mu.Unlock()
			}
		}
	} else {
		p.up.Set(1)
		changed = p.syncSpecs(ctx, st)
		// Positions first: a feed the peer released starts here only
		// once its groups hold where the peer stopped.
		p.shadow(ctx, st)
		specs, _, _ := p.storedSpecs(ctx)
		p.mu.Lock()
		if !p.contacted {
			p.log.Info("peer site answered", "peer", p.cfg.Peer, "running", st.Running)
		}
		p.contacted, p.lastContact, p.peer, p.peerErr = true, now, st, nil
		if p.takenOver {
			p.takenOver, changed = false, true
			p.taken.Set(0)
			p.owe(specs)
			p.log.Info("peer site is back: its feeds go back to it", "peer", p.cfg.Peer)
			// The copies held while it was down go to it now, not after
			// the mirror's back-off: the hand-back waits for them.
			p.cfg.Mirror.Kick()
		}
		dropped := false
		for name := range p.released {
			if slices.Contains(st.Running, name) {
				delete(p.released, name)
				delete(p.final, name)
				dropped = true
			}
		}
		if dropped {
			p.saveReleased()
		}
		p.mu.Unlock()
	}
	if changed || p.placementChanged(ctx) {
		p.cfg.OnChange()
	}
}

// PeerDown reports, while the peer does not answer, since when (this
// site's start if it never did), why, and whether this site runs its feeds.
func (p *Pair) PeerDown() (down bool, since time.Time, why error, takenOver bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.peerErr == nil {
		return false, time.Time{}, nil, false
	}
	since = p.lastContact
	if !p.contacted {
		since = p.started
	}
	return true, since, p.peerErr, p.takenOver
}

// Peer is the peer site's name.
func (p *Pair) Peer() string { return p.cfg.Peer }

// fetch asks the peer for its state.
func (p *Pair) fetch(ctx context.Context) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.cfg.PeerURL, "/")+"/api/v1/site", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.cfg.PeerToken)
	resp, err := p.cfg.HTTP.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "malformed HTTP") {
			return nil, p.notAPI("answers, but not HTTP", err.Error())
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	isJSON := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
	if resp.StatusCode != http.StatusOK {
		if !isJSON {
			return nil, p.notAPI("answered "+resp.Status, string(body))
		}
		return nil, fmt.Errorf("peer %s answered %s: %.200s", p.cfg.PeerURL, resp.Status, body)
	}
	var st State
	if err := json.Unmarshal(body, &st); err != nil || st.Site == "" {
		return nil, p.notAPI("answered 200 OK without a site's state", string(body))
	}
	if st.Site != p.cfg.Peer {
		return nil, fmt.Errorf("peer %s says it is site %q, not %q (-peer-site)", p.cfg.PeerURL, st.Site, p.cfg.Peer)
	}
	return &st, nil
}

// notAPI is the error of a peer that answered, but not as signalbox's API
// answers: a -peer-url that names another server, or another port of the
// peer (its Kafka, its CURRI listener).
func (p *Pair) notAPI(what, detail string) error {
	return fmt.Errorf("peer %s %s: not signalbox's API (is -peer-url the peer site's API address?): %.200q", p.cfg.PeerURL, what, detail)
}

// owner is the site that runs spec: a feed stored before the site pair was
// set up belongs to this site.
func (p *Pair) owner(spec *director.FeedSpec) string {
	if spec.Site == "" {
		return p.cfg.Site
	}
	return spec.Site
}

// storedSpecs are the feeds of this site's store, by name.
func (p *Pair) storedSpecs(ctx context.Context) (map[string]director.FeedSpec, map[string][]byte, error) {
	recs, err := p.cfg.Store.ListFeeds(ctx)
	if err != nil {
		return nil, nil, err
	}
	specs := make(map[string]director.FeedSpec, len(recs))
	raw := make(map[string][]byte, len(recs))
	for _, r := range recs {
		var s director.FeedSpec
		if err := json.Unmarshal(r.Spec, &s); err != nil {
			continue // reconcile reports it
		}
		specs[r.Name], raw[r.Name] = s, r.Spec
	}
	return specs, raw, nil
}

// syncSpecs writes the peer's feeds into this site's store as they are there,
// and deletes the ones it no longer has; it reports whether it wrote.
func (p *Pair) syncSpecs(ctx context.Context, st *State) bool {
	have, raw, err := p.storedSpecs(ctx)
	if err != nil {
		p.log.Warn("site: list stored feeds", "err", err)
		return false
	}
	wrote := false
	theirs := map[string]bool{}
	for i := range st.Feeds {
		s := st.Feeds[i]
		s.Site = p.cfg.Peer
		theirs[s.Name] = true
		b, err := json.Marshal(&s)
		if err != nil {
			continue
		}
		old, ok := have[s.Name]
		switch {
		case ok && p.owner(&old) != p.cfg.Peer:
			p.mu.Lock()
			seen := p.conflicts[s.Name]
			p.conflicts[s.Name] = true
			p.mu.Unlock()
			if !seen {
				p.log.Error("site: the peer has a feed of the same name as one of this site's; not mirrored (rename one)", "feed", s.Name, "peer", p.cfg.Peer)
			}
			continue
		case ok && string(raw[s.Name]) == string(b):
			continue
		case ok:
			err = p.cfg.Store.UpdateFeed(ctx, &store.FeedRecord{Name: s.Name, Spec: b})
		default:
			err = p.cfg.Store.CreateFeed(ctx, &store.FeedRecord{Name: s.Name, Spec: b})
		}
		if err != nil {
			p.log.Warn("site: mirror the peer's feed", "feed", s.Name, "err", err)
			continue
		}
		wrote = true
		p.log.Info("site: the peer's feed mirrored", "feed", s.Name, "peer", p.cfg.Peer)
	}
	for name, s := range have {
		if p.owner(&s) == p.cfg.Peer && !theirs[name] {
			if err := p.cfg.Store.DeleteFeed(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
				p.log.Warn("site: delete the peer's removed feed", "feed", name, "err", err)
				continue
			}
			wrote = true
			p.log.Info("site: the peer's feed removed", "feed", name, "peer", p.cfg.Peer)
		}
	}
	return wrote
}

// runs reports whether this site runs the feed now; p.mu is held.
func (p *Pair) runs(spec *director.FeedSpec) bool {
	if p.owner(spec) != p.cfg.Site {
		return p.takenOver
	}
	if p.takenOver {
		return true
	}
	if !p.contacted {
		// Just started: the peer may have taken this site's feeds over.
		// Hear from it first, or wait out the takeover time.
		return time.Since(p.started) >= p.cfg.Takeover
	}
	if slices.Contains(p.peer.Running, spec.Name) {
		return false
	}
	since, waiting := p.waiting[spec.Name]
	return !waiting || time.Since(since) >= HandBackWait
}

// Place is specs as this site applies them: each reads this site's NF
// topics and the peer's mirrored ones, a feed this site does not run now
// stands by, and one it runs for the peer starts where the peer's group
// has no position at the feed's creation.
func (p *Pair) Place(specs []director.FeedSpec) []director.Plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]director.Plan, 0, len(specs))
	p.placed = make(map[string]bool, len(specs))
	for _, s := range specs {
		var src []string
		for _, t := range s.Sources {
			src = append(src, t)
			if p.nf[t] && !slices.Contains(s.Sources, MirroredTopic(p.cfg.Peer, t)) {
				src = append(src, MirroredTopic(p.cfg.Peer, t))
			}
		}
		s.Sources = src
		run := p.runs(&s)
		p.placed[s.Name] = run
		out = append(out, director.Plan{Spec: s, Standby: !run, FromCreation: run && p.owner(&s) != p.cfg.Site})
	}
	return out
}

// placementChanged reports whether Place would decide otherwise now for a
// stored feed (the takeover time passed since the start, the peer started
// or stopped a feed).
func (p *Pair) placementChanged(ctx context.Context) bool {
	specs, _, err := p.storedSpecs(ctx)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, s := range specs {
		if run, ok := p.placed[n]; !ok || run != p.runs(&s) {
			return true
		}
	}
	return false
}

// running reports whether this node runs the named feed now.
func (p *Pair) running(name string) bool {
	st, ok := p.cfg.Feeds.Status(name)
	if !ok {
		return false
	}
	switch st.State {
	case director.StateStandby, director.StateStopped, director.StateError:
		return false
	}
	return true
}

// State is this site's answer to the peer.
func (p *Pair) State(ctx context.Context) (*State, error) {
	specs, _, err := p.storedSpecs(ctx)
	if err != nil {
		return nil, err
	}
	st := &State{Site: p.cfg.Site, Feeds: []director.FeedSpec{}, Running: []string{}, Released: []string{}, Progress: map[string][]Position{}}
	p.mu.Lock()
	st.TakenOver = p.takenOver
	released := make(map[string]bool, len(p.released))
	for n := range p.released {
		released[n] = true
	}
	p.mu.Unlock()
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := specs[n]
		own := p.owner(&s) == p.cfg.Site
		if own {
			s.Site = p.cfg.Site
			st.Feeds = append(st.Feeds, s)
		}
		run := p.running(n)
		switch {
		case run:
			st.Running = append(st.Running, n)
		case !own && released[n]:
			st.Released = append(st.Released, n)
			st.Progress[n] = p.finalPositions(ctx, &s)
			continue
		default:
			continue
		}
		pos, err := p.positions(ctx, &s, false)
		if err != nil {
			return nil, err
		}
		st.Progress[n] = pos
	}
	return st, nil
}

// positions are the feed's committed positions in the peer's terms; final
// ones (the feed stopped) say where they are not exact yet (Pending).
func (p *Pair) positions(ctx context.Context, spec *director.FeedSpec, final bool) ([]Position, error) {
	var out []Position
	mirrored := MirroredTopic(p.cfg.Peer, "")
	for _, g := range p.cfg.Feeds.Groups(spec) {
		offs, err := p.adm.FetchOffsets(ctx, g)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("feed %q: committed offsets: %w", spec.Name, err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			switch {
			case o.At < 0:
			case p.nf[o.Topic] && final:
				d, exact, err := p.cfg.Mirror.PeerPosition(ctx, o.Topic, o.Partition, o.At)
				if err != nil {
					p.log.Warn("site: translate a released feed's position", "feed", spec.Name, "topic", o.Topic, "partition", o.Partition, "err", err)
				}
				out = append(out, Position{Group: g, Topic: MirroredTopic(p.cfg.Site, o.Topic), Partition: o.Partition, Offset: d, Pending: !exact})
			case p.nf[o.Topic]:
				if d, ok := p.cfg.Mirror.PeerOffset(ctx, o.Topic, o.Partition, o.At); ok {
					out = append(out, Position{Group: g, Topic: MirroredTopic(p.cfg.Site, o.Topic), Partition: o.Partition, Offset: d})
				}
			case strings.HasPrefix(o.Topic, mirrored) && p.nf[strings.TrimPrefix(o.Topic, mirrored)]:
				out = append(out, Position{Group: g, Topic: strings.TrimPrefix(o.Topic, mirrored), Partition: o.Partition, Offset: o.At, Mirror: true})
			}
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Group < b.Group || a.Group == b.Group && (a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return out, nil
}

// shadow commits, for each feed the peer runs or released that this node
// does not run, the peer's positions into the feed's groups here: when this
// site starts the feed, it goes on where the peer delivered.
//
// A feed the peer released (handed back after a takeover) starts here only
// once all its positions are committed exactly: one the peer cannot give
// yet (Pending) or this site cannot translate yet holds the feed, for at
// most HandBackWait (Waiting, signalbox_site_positions_pending).
func (p *Pair) shadow(ctx context.Context, st *State) {
	unresolved := map[string]bool{}
	for name, pos := range st.Progress {
		if p.running(name) {
			continue
		}
		released := slices.Contains(st.Released, name)
		byGroup := map[string]kadm.Offsets{}
		for _, q := range pos {
			topic, at := q.Topic, q.Offset
			if q.Pending {
				unresolved[name] = released
				continue
			}
			if q.Mirror {
				o, ok := p.cfg.Mirror.LocalOffset(ctx, q.Topic, q.Partition, q.Offset)
				if !ok {
					unresolved[name] = released
					continue // unknown for now: keep what is committed
				}
				at = o
			} else if !strings.HasPrefix(topic, MirroredTopic(p.cfg.Peer, "")) {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", q.Group, topic, q.Partition)
			p.mu.Lock()
			last, seen := p.committed[key]
			p.mu.Unlock()
			if seen && last == at {
				continue
			}
			offs := byGroup[q.Group]
			if offs == nil {
				offs = kadm.Offsets{}
				byGroup[q.Group] = offs
			}
			offs.Add(kadm.Offset{Topic: topic, Partition: q.Partition, At: at, LeaderEpoch: -1})
		}
		for g, offs := range byGroup {
			if err := p.adm.CommitAllOffsets(ctx, g, offs); err != nil {
				p.log.Warn("site: commit the peer's position", "feed", name, "group", g, "err", err)
				unresolved[name] = released
				continue
			}
			p.mu.Lock()
			offs.Each(func(o kadm.Offset) {
				p.committed[fmt.Sprintf("%s/%s/%d", g, o.Topic, o.Partition)] = o.At
				p.shadowed.Inc()
			})
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.waiting {
		if !unresolved[name] {
			if time.Since(p.waiting[name]) < HandBackWait {
				p.log.Info("site: the peer's positions of a handed-back feed are known: it starts here", "feed", name,
					"waited", time.Since(p.waiting[name]).Round(time.Millisecond))
			}
			delete(p.waiting, name)
		}
	}
	for name, rel := range unresolved {
		if _, ok := p.waiting[name]; rel && !ok {
			p.waiting[name] = time.Now()
			p.log.Warn("site: the peer handed a feed back before its positions are known here; the feed waits for them",
				"feed", name, "peer", p.cfg.Peer, "at_most", HandBackWait)
		}
	}
	p.pending.Set(float64(len(p.waiting)))
}
