// Package reputation looks calling numbers up in an external reputation
// service for the call policies that have one (callpolicy.Reputation): an
// HTTP GET answered with JSON holding a score and labels, cached per
// policy, and never waited for past the call's time budget. A lookup that
// misses the cache starts one request per number (callers of the same
// number share it); the call waits for it at most its budget, while the
// request itself may run on (up to Config.RequestTimeout) to fill the cache
// for the next call. A service that fails several times in a row is left
// alone for a while (its lookups answer at once, as failures) instead of
// costing every call its whole budget.
package reputation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// Config configures a Client. Zero fields take the defaults.
type Config struct {
	// RequestTimeout bounds one HTTP request, however long the calls
	// that wait for it may (default 2 s).
	RequestTimeout time.Duration
	// TripAfter failures in a row stop requests to a service for
	// CoolDown (defaults 5 and 10 s); then one request tries again.
	TripAfter int
	CoolDown  time.Duration
	// MaxBodyBytes bounds an answer (default 64 KiB).
	MaxBodyBytes int64
	HTTPClient   *http.Client // default: keep-alive pool, 64 connections per host
	Registerer   prometheus.Registerer
	Logger       *slog.Logger
}

// Lookup results, as counted.
const (
	ResultHit         = "hit"         // from the cache
	ResultAnswered    = "answered"    // the service answered within the budget
	ResultTimeout     = "timeout"     // no answer within the budget (the request may still fill the cache)
	ResultError       = "error"       // the service failed (status, body, connection)
	ResultUnavailable = "unavailable" // not asked: the service failed repeatedly and is cooling down
)

// Result indexes, in resultNames order.
const (
	resHit = iota
	resAnswered
	resTimeout
	resError
	resUnavailable
	numResults
)

var resultNames = [numResults]string{ResultHit, ResultAnswered, ResultTimeout, ResultError, ResultUnavailable}

// Client implements callpolicy.Reputer.
type Client struct {
	cfg Config
	hc  *http.Client
	log *slog.Logger

	caches sync.Map // policy -> *cache; replaced when the policy's settings change

	mu       sync.Mutex
	flights  map[string]*flight  // by URL
	services map[string]*service // by URL template

	lookups  *prometheus.CounterVec
	duration prometheus.Histogram
}

// flight is one request in progress; done closes when res is set.
type flight struct {
	done  chan struct{}
	res   callpolicy.ReputationResult
	cache *cache // where fetch puts the answer
}

// service tracks a reputation service's consecutive failures.
type service struct {
	failures  int
	downUntil time.Time
	lastErr   string
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.TripAfter <= 0 {
		cfg.TripAfter = 5
	}
	if cfg.CoolDown <= 0 {
		cfg.CoolDown = 10 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		tr.MaxConnsPerHost = 256
		hc = &http.Client{Transport: tr, Timeout: cfg.RequestTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	c := &Client{cfg: cfg, hc: hc, log: cfg.Logger.With("component", "reputation"),
		flights: map[string]*flight{}, services: map[string]*service{},
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_reputation_lookups_total",
			Help: "Reputation lookups of calling numbers by policy and result: hit (cache), answered, timeout (no answer within the call's budget), error, unavailable (the service is cooling down after repeated failures)."},
			[]string{"policy", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "signalbox_reputation_request_duration_seconds",
			Help:    "Time of the HTTP requests to reputation services, whether or not a call still waited.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2}}),
	}
	if cfg.Registerer != nil {
		for _, m := range []prometheus.Collector{c.lookups, c.duration} {
			if err := cfg.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("reputation: register metrics: %w", err)
			}
		}
	}
	return c, nil
}

// Lookup answers within budget from the cache or the service.
func (c *Client) Lookup(policy string, r *callpolicy.Reputation, number string, budget time.Duration, live bool) callpolicy.ReputationResult {
	now := time.Now()
	ch := c.cacheFor(policy, r)
	if res, ok := ch.get(number, now); ok {
		ch.count(resHit, live)
		return res
	}
	u := strings.ReplaceAll(r.URL, "{number}", url.QueryEscape(number))
	c.mu.Lock()
	svc := c.services[r.URL]
	if svc == nil {
		svc = &service{}
		c.services[r.URL] = svc
	}
	if now.Before(svc.downUntil) {
		why := svc.lastErr
		c.mu.Unlock()
		ch.count(resUnavailable, live)
		return callpolicy.ReputationResult{Err: "service unavailable after repeated failures (last: " + why + ")"}
	}
	f := c.flights[u]
	if f == nil {
		f = &flight{done: make(chan struct{}), cache: ch}
		c.flights[u] = f
		go c.fetch(f, u, r, ch, number)
	}
	c.mu.Unlock()

	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-f.done:
		if f.res.Found {
			ch.count(resAnswered, live)
			if f.cache != ch { // another policy asked the same URL first
				ch.put(number, f.res, time.Now())
			}
		} else {
			ch.count(resError, live)
		}
		return f.res
	case <-t.C:
		ch.count(resTimeout, live)
		return callpolicy.ReputationResult{Err: "no answer within " + budget.String()}
	}
}

// fetch asks the service, caches a good answer and records the outcome.
func (c *Client) fetch(f *flight, u string, r *callpolicy.Reputation, ch *cache, number string) {
	start := time.Now()
	res := c.request(u, r)
	c.duration.Observe(time.Since(start).Seconds())
	if res.Found {
		ch.put(number, res, time.Now())
	}
	c.mu.Lock()
	delete(c.flights, u)
	svc := c.services[r.URL]
	if res.Found {
		svc.failures, svc.lastErr = 0, ""
	} else {
		svc.failures++
		svc.lastErr = res.Err
		if svc.failures >= c.cfg.TripAfter {
			if time.Now().After(svc.downUntil) {
				c.log.Warn("reputation service failing: lookups stop for a while", "url", r.URL,
					"failures", svc.failures, "cool_down", c.cfg.CoolDown, "err", res.Err)
			}
			svc.downUntil = time.Now().Add(c.cfg.CoolDown)
		}
	}
	c.mu.Unlock()
	f.res = res
	close(f.done)
}

// request GETs u and reads the score and labels.
func (c *Client) request(u string, r *callpolicy.Reputation) callpolicy.ReputationResult {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return callpolicy.ReputationResult{Err: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "signalbox-reputation/1")
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return callpolicy.ReputationResult{Err: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBodyBytes+1))
	if err != nil {
		return callpolicy.ReputationResult{Err: "reading the answer: " + err.Error()}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		// The service knows nothing of the number: a clean record.
		return callpolicy.ReputationResult{Found: true}
	case resp.StatusCode/100 != 2:
		return callpolicy.ReputationResult{Err: "HTTP " + strconv.Itoa(resp.StatusCode)}
	case int64(len(body)) > c.cfg.MaxBodyBytes:
		return callpolicy.ReputationResult{Err: fmt.Sprintf("answer over %d bytes", c.cfg.MaxBodyBytes)}
	}
	return Parse(body, r.ScoreField, r.LabelsField)
}

// Parse reads an answer: the score at scoreField (a number, or a number in
// a string; default "score") and the labels at labelsField (strings, or
// one string; default "labels"), each a dotted path into nested objects.
// An answer without a score has none of its own: score 0.
func Parse(body []byte, scoreField, labelsField string) callpolicy.ReputationResult {
	var doc any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return callpolicy.ReputationResult{Err: "answer is not JSON: " + err.Error()}
	}
	res := callpolicy.ReputationResult{Found: true}
	if scoreField == "" {
		scoreField = "score"
	}
	if labelsField == "" {
		labelsField = "labels"
	}
	switch v := at(doc, scoreField).(type) {
	case nil:
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return callpolicy.ReputationResult{Err: fmt.Sprintf("%s: %v", scoreField, err)}
		}
		res.Score = f
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return callpolicy.ReputationResult{Err: fmt.Sprintf("%s: %q is not a number", scoreField, v)}
		}
		res.Score = f
	default:
		return callpolicy.ReputationResult{Err: fmt.Sprintf("%s: a %T, not a number", scoreField, v)}
	}
	switch v := at(doc, labelsField).(type) {
	case string:
		if v != "" {
			res.Labels = []string{v}
		}
	case []any:
		for _, l := range v {
			if s, ok := l.(string); ok && s != "" && len(res.Labels) < 32 {
				res.Labels = append(res.Labels, s)
			}
		}
	}
	return res
}

// at follows a dotted path through nested objects.
func at(doc any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[k]
	}
	return doc
}

// cacheFor returns the policy's cache, sized by its settings (a resize
// starts it empty).
func (c *Client) cacheFor(policy string, r *callpolicy.Reputation) *cache {
	size, ttl := r.CacheSize, time.Duration(r.CacheTTLSeconds)*time.Second
	if size <= 0 {
		size = callpolicy.DefaultReputationCache
	}
	if ttl <= 0 {
		ttl = callpolicy.DefaultReputationTTL * time.Second
	}
	same := func(v any, ok bool) (*cache, bool) {
		if !ok {
			return nil, false
		}
		ch := v.(*cache)
		return ch, ch.size == size && ch.ttl == ttl && ch.url == r.URL
	}
	if ch, ok := same(c.caches.Load(policy)); ok {
		return ch
	}
	// Made once, under the lock, however many calls miss it at once.
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := same(c.caches.Load(policy)); ok {
		return ch
	}
	ch := newCache(size, ttl, r.URL)
	for i, name := range resultNames {
		ch.counts[i] = c.lookups.WithLabelValues(policy, name)
	}
	c.caches.Store(policy, ch)
	return ch
}

// Down lists the services that failed TripAfter times in a row and have
// not answered since, with their last error: the app alarms on them.
func (c *Client) Down() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for u, s := range c.services {
		if s.failures >= c.cfg.TripAfter {
			out[u] = s.lastErr
		}
	}
	return out
}
