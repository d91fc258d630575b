package site

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
)

// The hand-back: when the peer is back after a takeover, this site stops
// the peer's feeds and reports where they stopped (final positions, exact
// once every copy they passed is mirrored into the peer's Kafka); the peer
// waits for exact positions before it starts them (shadow, Waiting). What
// this site owes the peer is kept across its restarts (HandbackFile).

// owe records, as this site takes the peer's feeds (of specs) over and as
// it stops them, that it owes the peer their final positions (released):
// kept in HandbackFile, a site that restarts before handing them back still
// does, rather than the peer delivering again all this site delivered.
// p.mu is held.
func (p *Pair) owe(specs map[string]director.FeedSpec) {
	add := false
	for name, s := range specs {
		if p.owner(&s) == p.cfg.Peer && !p.released[name] {
			p.released[name], add = true, true
		}
	}
	if add {
		p.saveReleased()
	}
}

// saveReleased writes the feeds this site owes the peer positions of to
// HandbackFile; p.mu is held.
func (p *Pair) saveReleased() {
	if p.cfg.HandbackFile == "" {
		return
	}
	names := slices.Sorted(maps.Keys(p.released))
	b, _ := json.Marshal(names)
	tmp := p.cfg.HandbackFile + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, p.cfg.HandbackFile)
	}
	if err != nil {
		p.log.Warn("site: keep the feeds to hand back", "file", p.cfg.HandbackFile, "err", err)
	}
}

// loadReleased reads HandbackFile: the peer's feeds this site ran before
// it stopped and has not handed back.
func (p *Pair) loadReleased() {
	if p.cfg.HandbackFile == "" {
		return
	}
	b, err := os.ReadFile(p.cfg.HandbackFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			p.log.Warn("site: read the feeds to hand back", "file", p.cfg.HandbackFile, "err", err)
		}
		return
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		p.log.Warn("site: read the feeds to hand back", "file", p.cfg.HandbackFile, "err", err)
		return
	}
	for _, n := range names {
		p.released[n] = true
	}
	if len(names) > 0 {
		p.log.Info("site: feeds of the peer this site ran before it stopped: their positions go to it", "feeds", names)
	}
}

// Waiting are this site's feeds the peer handed back that wait for exact
// positions (or waited HandBackWait and started without), and since when.
func (p *Pair) Waiting() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.waiting)
}

// finalPositions are the positions of a feed this site ran for the peer and
// stopped: exact once every copy they pass is mirrored into the peer's Kafka
// (kept from then on), pending until.
func (p *Pair) finalPositions(ctx context.Context, spec *director.FeedSpec) []Position {
	p.mu.Lock()
	pos, ok := p.final[spec.Name]
	p.mu.Unlock()
	if ok {
		return pos
	}
	pos, err := p.positions(ctx, spec, true)
	if err != nil {
		p.log.Warn("site: positions of a released feed", "feed", spec.Name, "err", err)
		return []Position{{Pending: true}} // unknown as yet: the peer waits
	}
	if !slices.ContainsFunc(pos, func(q Position) bool { return q.Pending }) {
		p.mu.Lock()
		p.final[spec.Name] = pos
		p.mu.Unlock()
	}
	return pos
}
