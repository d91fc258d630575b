// Package webhook tells other systems (a chat channel, a ticketing system,
// a SOAR) of what happens to calls and to signalbox: a rule's hits, a rate
// limit tripping, a block-list hit, an alarm raised or cleared. Each
// webhook is an HTTPS (or HTTP) endpoint that gets a JSON POST per event,
// signed with HMAC-SHA256 over its timestamp and body, delivered in order
// from a bounded queue (a full queue drops and counts, a call never waits)
// and retried with backoff.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/platform/obs"
)

// Event types.
const (
	EventRuleHit      = "rule_hit"       // a rule decided a call
	EventRateLimited  = "rate_limited"   // a rate limit decided a call
	EventBlockListHit = "block_list_hit" // a block list decided a call
	EventAlarmRaised  = "alarm_raised"
	EventAlarmCleared = "alarm_cleared"
	EventTest         = "test" // POST /api/v1/webhooks/{name}/test
)

// EventTypes are the events a webhook may subscribe to.
var EventTypes = []string{EventRuleHit, EventRateLimited, EventBlockListHit, EventAlarmRaised, EventAlarmCleared}

// Spec is a webhook as configured.
type Spec struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Secret keys the signature. The API makes one when none is given
	// and shows it only in the answer that made it.
	Secret string   `json:"secret,omitempty"`
	Events []string `json:"events"`
	// Policies limits the call events to these policies (all when empty);
	// RuleIDs limits rule_hit to these rules (all when empty).
	Policies []string `json:"policies,omitempty"`
	RuleIDs  []int64  `json:"rule_ids,omitempty"`
	// ThrottleSeconds sends only the first event per window of each rule
	// (rule_hit), calling number (rate_limited, block_list_hit) or alarm;
	// the next one sent says how many were held back. 0: every event.
	ThrottleSeconds int   `json:"throttle_seconds,omitempty"`
	Enabled         *bool `json:"enabled,omitempty"` // default true
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// FieldError names the field of a spec at fault.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks a spec.
func (s *Spec) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return &FieldError{"name", fmt.Sprintf("%q: lower-case letters, digits, _ . and -, starting with a letter or digit, at most 64", s.Name)}
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &FieldError{"url", fmt.Sprintf("%q: want an http:// or https:// URL", s.URL)}
	}
	if len(s.Events) == 0 {
		return &FieldError{"events", "at least one of " + fmt.Sprint(EventTypes)}
	}
	for i, e := range s.Events {
		if !slices.Contains(EventTypes, e) {
			return &FieldError{"events[" + strconv.Itoa(i) + "]", fmt.Sprintf("%q: want one of %v", e, EventTypes)}
		}
	}
	if len(s.Secret) > 0 && len(s.Secret) < 16 {
		return &FieldError{"secret", "at least 16 characters (or leave it out and one is made)"}
	}
	if s.ThrottleSeconds < 0 || s.ThrottleSeconds > 7*86400 {
		return &FieldError{"throttle_seconds", fmt.Sprintf("%d out of range 0..604800", s.ThrottleSeconds)}
	}
	if len(s.Policies) > 100 || len(s.RuleIDs) > 1000 {
		return &FieldError{"policies", "at most 100 policies and 1000 rule ids"}
	}
	return nil
}

// NewSecret returns a fresh signing secret.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Event is what a webhook is sent, as JSON.
type Event struct {
	ID      string             `json:"id"`
	Type    string             `json:"type"`
	Time    time.Time          `json:"time"`
	Node    string             `json:"node"`
	Webhook string             `json:"webhook"`
	Call    *callrecord.Record `json:"call,omitempty"`  // call events
	Alarm   *obs.Alarm         `json:"alarm,omitempty"` // alarm events
	// Throttled counts the events of this key held back since the last
	// one sent (throttle_seconds).
	Throttled int `json:"throttled,omitempty"`
}

// Sign returns the X-Signalbox-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<unix seconds>.<body>">".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Config configures a Dispatcher. Zero fields take the defaults.
type Config struct {
	Node        string
	Queue       int           // events waiting per webhook; default 1000
	Timeout     time.Duration // per request; default 5 s
	MaxAttempts int           // per event; default 6
	BackoffMin  time.Duration // default 1 s, doubling
	BackoffMax  time.Duration // default 60 s
	HTTPClient  *http.Client
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
	// MaskNumbers hides all but this many last digits of the numbers in
	// call events (callrecord.MaskNumber); 0 sends them whole.
	MaskNumbers int
}

// Dispatcher sends events to the configured webhooks.
type Dispatcher struct {
	cfg Config
	hc  *http.Client
	log *slog.Logger

	set atomic.Pointer[hookSet] // read by every call: no lock

	mu      sync.Mutex
	workers map[string]*worker

	deliveries *prometheus.CounterVec
	queueLen   *prometheus.GaugeVec
	seq        atomic.Uint64
}

// hookSet is the workers by event type, swapped whole on Apply.
type hookSet struct {
	byEvent map[string][]*worker
	calls   bool // some webhook takes call events
}

// New returns a Dispatcher with no webhooks.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Queue <= 0 {
		cfg.Queue = 1000
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 6
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	d := &Dispatcher{cfg: cfg, hc: hc, log: cfg.Logger.With("component", "webhook"), workers: map[string]*worker{},
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_webhook_events_total",
			Help: "Webhook events by webhook and result: delivered (2xx), failed (every attempt failed, or a 4xx), dropped (queue full), throttled (held back by throttle_seconds)."},
			[]string{"webhook", "result"}),
		queueLen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "signalbox_webhook_queue_length",
			Help: "Webhook events waiting to be delivered, by webhook."}, []string{"webhook"}),
	}
	d.set.Store(&hookSet{})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{d.deliveries, d.queueLen} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("webhook: register metrics: %w", err)
			}
		}
	}
	return d, nil
}

// Apply makes specs the running webhooks: new ones start, removed ones
// stop (their queued events are dropped), changed ones restart.
func (d *Dispatcher) Apply(specs []Spec) {
	d.mu.Lock()
	defer d.mu.Unlock()
	want := map[string]Spec{}
	for _, s := range specs {
		if s.Enabled == nil || *s.Enabled {
			want[s.Name] = s
		}
	}
	for name, w := range d.workers {
		if s, ok := want[name]; !ok || !sameSpec(&s, &w.spec) {
			w.close()
			delete(d.workers, name)
			if !ok {
				d.deliveries.DeletePartialMatch(prometheus.Labels{"webhook": name})
				d.queueLen.DeleteLabelValues(name)
			}
		}
	}
	set := &hookSet{byEvent: map[string][]*worker{}}
	for name, s := range want {
		w := d.workers[name]
		if w == nil {
			w = d.start(s)
			d.workers[name] = w
		}
		for _, e := range s.Events {
			set.byEvent[e] = append(set.byEvent[e], w)
			if e == EventRuleHit || e == EventRateLimited || e == EventBlockListHit {
				set.calls = true
			}
		}
	}
	d.set.Store(set)
}

func sameSpec(a, b *Spec) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Close stops every webhook.
func (d *Dispatcher) Close() {
	d.Apply(nil)
}

// Call turns a call decision into events for the webhooks that take them.
// It is called after CUCM has its answer, and returns at once.
func (d *Dispatcher) Call(r *callrecord.Record) {
	set := d.set.Load()
	if !set.calls {
		return
	}
	var typ, key string
	switch r.Step {
	case "rule":
		typ, key = EventRuleHit, "rule "+strconv.FormatInt(r.RuleID, 10)
	case "rate_limit":
		typ, key = EventRateLimited, callerKey(r)
	case "block_list":
		typ, key = EventBlockListHit, callerKey(r)
	default:
		return
	}
	var ev *Event
	for _, w := range set.byEvent[typ] {
		if len(w.spec.Policies) > 0 && !slices.Contains(w.spec.Policies, r.Policy) {
			continue
		}
		if typ == EventRuleHit && len(w.spec.RuleIDs) > 0 && !slices.Contains(w.spec.RuleIDs, r.RuleID) {
			continue
		}
		if ev == nil {
			rec := *r
			rec.Mask(d.cfg.MaskNumbers)
			ev = &Event{Type: typ, Time: r.Time, Node: d.cfg.Node, Call: &rec}
		}
		w.offer(ev, typ+" "+key)
	}
}

func callerKey(r *callrecord.Record) string {
	if r.TransformedCalling != "" {
		return r.TransformedCalling
	}
	return r.Calling
}

// Alarm turns an alarm raised or cleared into events (obs.Alarms.Subscribe).
func (d *Dispatcher) Alarm(a obs.Alarm) {
	typ, at := EventAlarmRaised, a.FirstSeen
	if !a.Active {
		typ = EventAlarmCleared
		if a.ClearedAt != nil {
			at = *a.ClearedAt
		}
	}
	for _, w := range d.set.Load().byEvent[typ] {
		al := a
		w.offer(&Event{Type: typ, Time: at, Node: d.cfg.Node, Alarm: &al}, typ+" "+a.ID)
	}
}

// TestResult is what a test event's one attempt got.
type TestResult struct {
	Delivered bool   `json:"delivered"`
	Status    int    `json:"status,omitempty"` // the endpoint's HTTP status
	Error     string `json:"error,omitempty"`
	Millis    int64  `json:"ms"`
	Event     Event  `json:"event"`
}

// Test sends spec one test event now, once, and says what happened.
func (d *Dispatcher) Test(ctx context.Context, spec Spec) TestResult {
	ev := Event{ID: d.newID(), Type: EventTest, Time: time.Now().UTC(), Node: d.cfg.Node, Webhook: spec.Name}
	start := time.Now()
	status, err := d.post(ctx, &spec, &ev)
	res := TestResult{Status: status, Millis: time.Since(start).Milliseconds(), Event: ev}
	if err != nil {
		res.Error = err.Error()
	} else {
		res.Delivered = true
	}
	return res
}

func (d *Dispatcher) newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("evt_%d_%s", d.seq.Add(1), hex.EncodeToString(b[:]))
}

// errPermanent marks an answer that sending again cannot change (a 4xx
// other than 408 and 429).
var errPermanent = errors.New("refused")

// post sends ev once to spec's URL.
func (d *Dispatcher) post(ctx context.Context, spec *Spec, ev *Event) (int, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, fmt.Errorf("%w: encode: %v", errPermanent, err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errPermanent, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "signalbox-webhook/1")
	req.Header.Set("X-Signalbox-Event", ev.Type)
	req.Header.Set("X-Signalbox-Delivery", ev.ID)
	req.Header.Set("X-Signalbox-Signature", Sign(spec.Secret, time.Now(), body))
	resp, err := d.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		return resp.StatusCode, nil
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return resp.StatusCode, fmt.Errorf("%w: HTTP %d", errPermanent, resp.StatusCode)
	default:
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
}

// Failing lists the webhooks whose last event failed for good, with why:
// the app alarms on them.
func (d *Dispatcher) Failing() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for name, w := range d.workers {
		if why := w.lastFailure.Load(); why != nil && *why != "" {
			out[name] = *why
		}
	}
	return out
}

// worker delivers one webhook's events in order.
type worker struct {
	d     *Dispatcher
	spec  Spec
	queue chan *Event
	stop  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	throttle map[string]*throttleState

	lastFailure                           atomic.Pointer[string]
	delivered, failed, dropped, throttled prometheus.Counter
	qlen                                  prometheus.Gauge
}

type throttleState struct {
	until time.Time
	held  int
}

func (d *Dispatcher) start(s Spec) *worker {
	l := prometheus.Labels{"webhook": s.Name}
	c := func(result string) prometheus.Counter {
		l := prometheus.Labels{"webhook": s.Name, "result": result}
		return d.deliveries.With(l)
	}
	w := &worker{d: d, spec: s, queue: make(chan *Event, d.cfg.Queue), stop: make(chan struct{}),
		throttle:  map[string]*throttleState{},
		delivered: c("delivered"), failed: c("failed"), dropped: c("dropped"), throttled: c("throttled"),
		qlen: d.queueLen.With(l)}
	go w.run()
	return w
}

func (w *worker) close() { w.once.Do(func() { close(w.stop) }) }

// offer queues ev (shared between webhooks: copied here) unless
// throttled; a full queue drops it.
func (w *worker) offer(ev *Event, key string) {
	held := 0
	if t := w.spec.ThrottleSeconds; t > 0 {
		now := time.Now()
		w.mu.Lock()
		st := w.throttle[key]
		if st != nil && now.Before(st.until) {
			st.held++
			w.mu.Unlock()
			w.throttled.Inc()
			return
		}
		if st == nil {
			if len(w.throttle) > 100_000 { // bounded: forget the windows
				clear(w.throttle)
			}
			st = &throttleState{}
			w.throttle[key] = st
		}
		held, st.held, st.until = st.held, 0, now.Add(time.Duration(t)*time.Second)
		w.mu.Unlock()
	}
	e := *ev
	e.ID, e.Webhook, e.Throttled = w.d.newID(), w.spec.Name, held
	select {
	case w.queue <- &e:
		w.qlen.Inc()
	default:
		w.dropped.Inc()
	}
}

func (w *worker) run() {
	for {
		select {
		case <-w.stop:
			return
		case ev := <-w.queue:
			w.qlen.Dec()
			w.deliver(ev)
		}
	}
}

// deliver sends ev, retrying with backoff, until it is delivered, refused
// for good, out of attempts, or the webhook stops.
func (w *worker) deliver(ev *Event) {
	backoff := w.d.cfg.BackoffMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-w.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := w.d.post(ctx, &w.spec, ev)
		cancel()
		if err == nil {
			w.delivered.Inc()
			empty := ""
			w.lastFailure.Store(&empty)
			return
		}
		if errors.Is(err, errPermanent) || attempt >= w.d.cfg.MaxAttempts {
			w.failed.Inc()
			why := fmt.Sprintf("event %s (%s) not delivered after %d attempt(s): %v", ev.ID, ev.Type, attempt, err)
			w.lastFailure.Store(&why)
			w.d.log.Warn("webhook event not delivered", "webhook", w.spec.Name, "event", ev.ID, "type", ev.Type, "attempts", attempt, "err", err)
			return
		}
		select {
		case <-w.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, w.d.cfg.BackoffMax)
	}
}
