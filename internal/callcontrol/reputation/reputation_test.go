package reputation

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// fakeService is a real HTTP reputation service whose behaviour the test sets.
type fakeService struct {
	*httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	delay    time.Duration
	status   int
	body     string
	hang     chan struct{} // when set, requests wait on it
	numbers  []string
}

func newService(t *testing.T) *fakeService {
	s := &fakeService{status: 200, body: `{"score":92,"labels":["robocall","spoofed"]}`}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		delay, status, body, hang := s.delay, s.status, s.body, s.hang
		s.numbers = append(s.numbers, r.URL.Query().Get("n"))
		s.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(func() {
		s.mu.Lock()
		if s.hang != nil {
			close(s.hang)
			s.hang = nil
		}
		s.mu.Unlock()
		s.Close()
	})
	return s
}

func (s *fakeService) set(f func(s *fakeService)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

func newClient(t *testing.T, cfg Config) (*Client, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

func spec(s *fakeService) *callpolicy.Reputation {
	return &callpolicy.Reputation{URL: s.URL + "/v1/lookup?n={number}"}
}

func timed(f func() callpolicy.ReputationResult) (callpolicy.ReputationResult, time.Duration) {
	start := time.Now()
	r := f()
	return r, time.Since(start)
}

func TestAnswerThenCache(t *testing.T) {
	svc := newService(t)
	c, _ := newClient(t, Config{})
	sp := spec(svc)
	res, _ := timed(func() callpolicy.ReputationResult {
		return c.Lookup("p", sp, "+19725550101", 20*time.Millisecond, true)
	})
	if !res.Found || res.Score != 92 || len(res.Labels) != 2 || res.Labels[0] != "robocall" || res.Cached {
		t.Fatalf("first lookup: %+v", res)
	}
	res, d := timed(func() callpolicy.ReputationResult {
		return c.Lookup("p", sp, "+19725550101", 20*time.Millisecond, true)
	})
	if !res.Found || !res.Cached || res.Score != 92 {
		t.Fatalf("second lookup: %+v", res)
	}
	if d > 10*time.Millisecond { // microseconds; a busy machine may preempt it
		t.Errorf("a cache hit took %s", d)
	}
	if n := svc.requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if svc.numbers[0] != "+19725550101" {
		t.Errorf("the service was asked about %q", svc.numbers[0])
	}
	if got := testutil.ToFloat64(c.lookups.WithLabelValues("p", ResultHit)); got != 1 {
		t.Errorf("hits %v", got)
	}
}

// A slow service costs a call its budget, no more; the answer still fills
// the cache for the next call.
func TestSlowServiceStaysWithinBudget(t *testing.T) {
	svc := newService(t)
	svc.set(func(s *fakeService) { s.delay = 300 * time.Millisecond })
	c, _ := newClient(t, Config{})
	sp := spec(svc)
	res, d := timed(func() callpolicy.ReputationResult { return c.Lookup("p", sp, "+1555", 20*time.Millisecond, true) })
	if res.Found || res.Err == "" {
		t.Fatalf("slow service: %+v", res)
	}
	// The budget, and on a busy machine a timer a little late; never the
	// service's 300 ms.
	if d < 20*time.Millisecond || d > 150*time.Millisecond {
		t.Errorf("the lookup took %s with a budget of 20 ms", d)
	}
	testkit.WaitFor(t, 10*time.Second, "the slow answer to land", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.flights) == 0
	})
	if res := c.Lookup("p", sp, "+1555", 20*time.Millisecond, true); !res.Found || !res.Cached {
		t.Errorf("after the slow answer: %+v", res)
	}
	if got := testutil.ToFloat64(c.lookups.WithLabelValues("p", ResultTimeout)); got != 1 {
		t.Errorf("timeouts %v", got)
	}
}

// A service that answers 500 fails each lookup; after TripAfter failures
// lookups answer at once without asking it, until it answers again.
func TestFailingServiceIsLeftAlone(t *testing.T) {
	svc := newService(t)
	svc.set(func(s *fakeService) { s.status = 500 })
	c, _ := newClient(t, Config{TripAfter: 3, CoolDown: 200 * time.Millisecond})
	sp := spec(svc)
	for i := range 3 {
		if res := c.Lookup("p", sp, fmt.Sprint(i), 20*time.Millisecond, true); res.Found || res.Err != "HTTP 500" {
			t.Fatalf("lookup %d: %+v", i, res)
		}
	}
	if down := c.Down(); down[sp.URL] != "HTTP 500" {
		t.Errorf("Down() = %v", down)
	}
	res, d := timed(func() callpolicy.ReputationResult { return c.Lookup("p", sp, "9", 20*time.Millisecond, true) })
	if res.Found || d >= 20*time.Millisecond || svc.requests.Load() != 3 { // at once, never its budget
		t.Errorf("cooling down: %+v in %s, %d requests", res, d, svc.requests.Load())
	}
	svc.set(func(s *fakeService) { s.status = 200 })
	time.Sleep(250 * time.Millisecond)
	if res := c.Lookup("p", sp, "10", 5*time.Second, true); !res.Found {
		t.Errorf("after the cool-down: %+v", res)
	}
	if down := c.Down(); len(down) != 0 {
		t.Errorf("Down() after recovery = %v", down)
	}
}

// A service that never answers costs each call its budget; its requests
// end at RequestTimeout.
func TestHangingService(t *testing.T) {
	svc := newService(t)
	svc.set(func(s *fakeService) { s.hang = make(chan struct{}) })
	c, _ := newClient(t, Config{RequestTimeout: 300 * time.Millisecond})
	sp := spec(svc)
	for i := range 3 {
		res, d := timed(func() callpolicy.ReputationResult { return c.Lookup("p", sp, "+1666", 15*time.Millisecond, true) })
		if res.Found || d > 150*time.Millisecond { // its budget, a timer late on a busy machine; never 300 ms
			t.Errorf("lookup %d: %+v in %s", i, res, d)
		}
	}
	// The three calls shared one request.
	if n := svc.requests.Load(); n != 1 {
		t.Errorf("%d requests for one number, want 1", n)
	}
	time.Sleep(400 * time.Millisecond)
	c.mu.Lock()
	inFlight, fails := len(c.flights), c.services[sp.URL].failures
	c.mu.Unlock()
	if inFlight != 0 || fails != 1 {
		t.Errorf("after RequestTimeout: %d requests in flight, %d failures", inFlight, fails)
	}
}

// Callers of one number share one request.
func TestConcurrentMissesShareARequest(t *testing.T) {
	svc := newService(t)
	svc.set(func(s *fakeService) { s.delay = 5 * time.Millisecond })
	c, _ := newClient(t, Config{})
	sp := spec(svc)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := c.Lookup("p", sp, "+1777", 40*time.Millisecond, true); !res.Found {
				t.Errorf("%+v", res)
			}
		}()
	}
	wg.Wait()
	if n := svc.requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestNotFoundIsAClean(t *testing.T) {
	svc := newService(t)
	svc.set(func(s *fakeService) { s.status, s.body = 404, `{"error":"unknown number"}` })
	c, _ := newClient(t, Config{})
	if res := c.Lookup("p", spec(svc), "+1888", 20*time.Millisecond, true); !res.Found || res.Score != 0 {
		t.Errorf("404: %+v", res)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		body, score, labels string
		want                callpolicy.ReputationResult
	}{
		{`{"score":80}`, "", "", callpolicy.ReputationResult{Found: true, Score: 80}},
		{`{"score":"72.5","labels":"scam"}`, "", "", callpolicy.ReputationResult{Found: true, Score: 72.5, Labels: []string{"scam"}}},
		{`{"result":{"risk":{"value":99}},"tags":["a",1,"b"]}`, "result.risk.value", "tags", callpolicy.ReputationResult{Found: true, Score: 99, Labels: []string{"a", "b"}}},
		{`{"labels":[]}`, "", "", callpolicy.ReputationResult{Found: true}},
		{`<html>`, "", "", callpolicy.ReputationResult{Err: "answer is not JSON: invalid character '<' looking for beginning of value"}},
		{`{"score":true}`, "", "", callpolicy.ReputationResult{Err: "score: a bool, not a number"}},
		{`{"score":"high"}`, "", "", callpolicy.ReputationResult{Err: `score: "high" is not a number`}},
	} {
		got := Parse([]byte(c.body), c.score, c.labels)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Parse(%s) = %+v, want %+v", c.body, got, c.want)
		}
	}
}

func TestCacheEvictsOldest(t *testing.T) {
	ch := newCache(32, time.Hour, "u")
	now := time.Now()
	for i := range 1000 {
		ch.put(fmt.Sprint(i), callpolicy.ReputationResult{Found: true, Score: float64(i)}, now)
	}
	n := 0
	for i := range ch.shards {
		n += len(ch.shards[i].m)
	}
	if n > 32 {
		t.Errorf("%d entries in a cache of 32", n)
	}
	if _, ok := ch.get("999", now); !ok {
		t.Error("the newest entry was evicted")
	}
	if _, ok := ch.get("999", now.Add(2*time.Hour)); ok {
		t.Error("an expired entry was returned")
	}
}

// The time a lookup adds to a call: from the cache, and from a service on
// loopback answering at once.
func BenchmarkLookup(b *testing.B) {
	svc := &fakeService{status: 200, body: `{"score":10}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, svc.body)
	}))
	defer srv.Close()
	c, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	sp := &callpolicy.Reputation{URL: srv.URL + "/?n={number}"}
	b.Run("warm", func(b *testing.B) {
		c.Lookup("p", sp, "+1999", 20*time.Millisecond, true)
		b.ReportAllocs()
		for b.Loop() {
			c.Lookup("p", sp, "+1999", 20*time.Millisecond, true)
		}
	})
	b.Run("cold", func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			if res := c.Lookup("p", sp, fmt.Sprint(i), 20*time.Millisecond, true); !res.Found {
				b.Fatal(res.Err)
			}
		}
	})
}
