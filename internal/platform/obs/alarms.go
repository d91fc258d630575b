package obs

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Severity of an alarm, in ITU X.733 terms.
type Severity string

const (
	Critical Severity = "critical"
	Major    Severity = "major"
	Minor    Severity = "minor"
	Warning  Severity = "warning"
)

var severities = []Severity{Critical, Major, Minor, Warning}

// Alarm is a raised (or, in history, cleared) condition.
type Alarm struct {
	ID          string     `json:"id"`     // source + "/" + kind: stable, so raising again updates
	Kind        string     `json:"kind"`   // e.g. feed_disconnected
	Source      string     `json:"source"` // e.g. feed/probe-a, curri/default
	Severity    Severity   `json:"severity"`
	Description string     `json:"description"`
	FirstSeen   time.Time  `json:"first_seen"`
	LastSeen    time.Time  `json:"last_seen"`
	Count       int64      `json:"count"`
	Active      bool       `json:"active"`
	ClearedAt   *time.Time `json:"cleared_at,omitempty"`
}

// Alarms keeps active alarms and a bounded history of cleared ones. Raising
// an active alarm again updates its last-seen time, count and description.
type Alarms struct {
	mu       sync.Mutex
	active   map[string]*Alarm
	history  []Alarm // cleared, newest last
	maxHist  int
	gauge    *prometheus.GaugeVec
	byKind   *prometheus.GaugeVec
	now      func() time.Time
	onChange []func(a Alarm)
}

// NewAlarms registers signalbox_alarms_active{severity} and
// signalbox_alarm_active{kind} on reg.
func NewAlarms(reg prometheus.Registerer) *Alarms {
	a := &Alarms{
		active:  map[string]*Alarm{},
		maxHist: 1000,
		now:     time.Now,
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "signalbox_alarms_active",
			Help: "Active alarms by severity.",
		}, []string{"severity"}),
		byKind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "signalbox_alarm_active",
			Help: "Active alarms by kind (feed_disconnected, curri_error_rate, ...): how many sources raise it now. The alert rules in deploy/prometheus fire on it.",
		}, []string{"kind"}),
	}
	for _, s := range severities {
		a.gauge.WithLabelValues(string(s)).Set(0)
	}
	if reg != nil {
		reg.MustRegister(a.gauge, a.byKind)
	}
	return a
}

// Declare makes signalbox_alarm_active{kind} exist (at 0) for each kind
// before any is raised, so alert rules and dashboards see the series.
func (a *Alarms) Declare(kinds ...string) {
	for _, k := range kinds {
		a.byKind.WithLabelValues(k).Add(0)
	}
}

// Subscribe calls fn, outside the lock, each time an alarm is raised (not
// when an active one is raised again) and each time one clears. fn must not
// block: the SNMP notifier queues and returns.
func (a *Alarms) Subscribe(fn func(Alarm)) {
	a.mu.Lock()
	a.onChange = append(a.onChange, fn)
	a.mu.Unlock()
}

// Raise raises (or refreshes) the alarm kind on source.
func (a *Alarms) Raise(kind, source string, sev Severity, description string) {
	now := a.now()
	id := source + "/" + kind
	a.mu.Lock()
	al, ok := a.active[id]
	if !ok {
		al = &Alarm{ID: id, Kind: kind, Source: source, Severity: sev, FirstSeen: now, Active: true}
		a.active[id] = al
		a.gauge.WithLabelValues(string(sev)).Inc()
		a.byKind.WithLabelValues(kind).Inc()
	} else if al.Severity != sev {
		a.gauge.WithLabelValues(string(al.Severity)).Dec()
		a.gauge.WithLabelValues(string(sev)).Inc()
		al.Severity = sev
	}
	al.Description = description
	al.LastSeen = now
	al.Count++
	snap := *al
	cb := a.onChange
	a.mu.Unlock()
	if !ok {
		for _, fn := range cb {
			fn(snap)
		}
	}
}

// Clear clears the alarm kind on source if it is active.
func (a *Alarms) Clear(kind, source string) {
	id := source + "/" + kind
	a.mu.Lock()
	al, ok := a.active[id]
	if !ok {
		a.mu.Unlock()
		return
	}
	delete(a.active, id)
	a.gauge.WithLabelValues(string(al.Severity)).Dec()
	a.byKind.WithLabelValues(kind).Dec()
	now := a.now()
	al.Active = false
	al.ClearedAt = &now
	a.history = append(a.history, *al)
	if len(a.history) > a.maxHist {
		a.history = append(a.history[:0], a.history[len(a.history)-a.maxHist:]...)
	}
	snap := *al
	cb := a.onChange
	a.mu.Unlock()
	for _, fn := range cb {
		fn(snap)
	}
}

// IsActive reports whether the alarm kind on source is raised.
func (a *Alarms) IsActive(kind, source string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.active[source+"/"+kind]
	return ok
}

// Active returns active alarms, most severe first, then newest.
func (a *Alarms) Active() []Alarm {
	a.mu.Lock()
	out := make([]Alarm, 0, len(a.active))
	for _, al := range a.active {
		out = append(out, *al)
	}
	a.mu.Unlock()
	rank := map[Severity]int{Critical: 0, Major: 1, Minor: 2, Warning: 3}
	sort.Slice(out, func(i, j int) bool {
		if rank[out[i].Severity] != rank[out[j].Severity] {
			return rank[out[i].Severity] < rank[out[j].Severity]
		}
		return out[i].LastSeen.After(out[j].LastSeen)
	})
	return out
}

// History returns cleared alarms, newest first, at most limit.
func (a *Alarms) History(limit int) []Alarm {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.history)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Alarm, 0, limit)
	for i := n - 1; i >= n-limit; i-- {
		out = append(out, a.history[i])
	}
	return out
}
