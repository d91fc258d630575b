package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
	"github.com/signalbox/signalbox/internal/platform/obs"
	"github.com/signalbox/signalbox/internal/testkit"
)

// receiver is a webhook endpoint that checks each signature the way the
// README tells a receiver to, and answers what the test says.
type receiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	events []Event
	status []int // answers in turn; then 204
	errs   []string
}

func newReceiver(t *testing.T, secret string, status ...int) *receiver {
	r := &receiver{secret: secret, status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := verify(r.secret, req.Header.Get("X-Signalbox-Signature"), body, time.Now()); err != "" {
			r.errs = append(r.errs, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if len(r.status) > 0 {
			code := r.status[0]
			r.status = r.status[1:]
			if code/100 != 2 {
				w.WriteHeader(code)
				return
			}
		}
		var ev Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != req.Header.Get("X-Signalbox-Event") || ev.ID != req.Header.Get("X-Signalbox-Delivery") {
			r.errs = append(r.errs, "bad event: "+string(body))
		}
		r.events = append(r.events, ev)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// verify checks "t=<unix>,v1=<hex>" as a receiver would, independently of
// Sign: the HMAC-SHA256 of "<t>.<body>", and t within 5 minutes.
func verify(secret, header string, body []byte, now time.Time) string {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "bad signature " + header
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if t := time.Unix(sec, 0); err != nil || now.Sub(t) > 5*time.Minute || t.Sub(now) > 5*time.Minute {
		return "stale timestamp " + ts
	}
	return ""
}

func (r *receiver) got() ([]Event, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...), append([]string(nil), r.errs...)
}

func newDispatcher(t *testing.T) *Dispatcher {
	d, err := New(Config{Node: "sb1", BackoffMin: 20 * time.Millisecond, MaxAttempts: 4, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func call(step string, rule int64, calling string) *callrecord.Record {
	return &callrecord.Record{Version: callrecord.Version, Time: time.Now(), Policy: "default", Calling: calling,
		Called: "5000", Decision: "deny", Step: step, RuleID: rule}
}

func TestEventsSignedAndThrottled(t *testing.T) {
	const secret = "a-very-secret-key-1"
	r := newReceiver(t, secret)
	d := newDispatcher(t)
	d.Apply([]Spec{{Name: "noc", URL: r.URL + "/hook", Secret: secret,
		Events: []string{EventRuleHit, EventRateLimited, EventAlarmRaised, EventAlarmCleared}, RuleIDs: []int64{7},
		ThrottleSeconds: 60}})
	for range 5 {
		d.Call(call("rule", 7, "+19725550101")) // one sent, four held back
	}
	d.Call(call("rule", 8, "+19725550101"))       // not a rule it takes
	d.Call(call("block_list", 0, "+19725550102")) // not an event it takes
	d.Call(call("rate_limit", 0, "+19725550103")) // sent
	d.Call(call("rate_limit", 0, "+19725550104")) // another caller: sent
	alarms := obs.NewAlarms(nil)
	alarms.Subscribe(d.Alarm)
	alarms.Raise("store_unreachable", "store", obs.Critical, "down")
	alarms.Clear("store_unreachable", "store")
	testkit.WaitFor(t, 5*time.Second, "5 events", func() bool { ev, _ := r.got(); return len(ev) >= 5 })
	time.Sleep(100 * time.Millisecond)
	evs, errs := r.got()
	if len(errs) > 0 {
		t.Fatalf("receiver: %v", errs)
	}
	types := map[string]int{}
	for _, e := range evs {
		types[e.Type]++
		if e.Webhook != "noc" || e.Node != "sb1" || e.ID == "" || e.Time.IsZero() {
			t.Errorf("event %+v", e)
		}
	}
	if len(evs) != 5 || types[EventRuleHit] != 1 || types[EventRateLimited] != 2 || types[EventAlarmRaised] != 1 || types[EventAlarmCleared] != 1 {
		t.Fatalf("events %v", types)
	}
	if e := evs[0]; e.Call == nil || e.Call.RuleID != 7 || e.Call.Calling != "+19725550101" {
		t.Errorf("rule event %+v", e)
	}
	// The next rule-7 event after the window says how many were held.
	d.mu.Lock()
	w := d.workers["noc"]
	w.mu.Lock()
	w.throttle["rule_hit rule 7"].until = time.Now()
	w.mu.Unlock()
	d.mu.Unlock()
	d.Call(call("rule", 7, "+19725550101"))
	testkit.WaitFor(t, 5*time.Second, "the next rule event", func() bool { ev, _ := r.got(); return len(ev) == 6 })
	evs, _ = r.got()
	if evs[5].Throttled != 4 {
		t.Errorf("throttled = %d, want 4", evs[5].Throttled)
	}
	if got := testutil.ToFloat64(w.throttled); got != 4 {
		t.Errorf("throttled counter %v", got)
	}
}

// A failing endpoint is retried with backoff; a 4xx is not; a wrong
// secret shows as the receiver's 401.
func TestRetriesAndFailures(t *testing.T) {
	const secret = "another-secret-key-2"
	r := newReceiver(t, secret, 500, 503, 200)
	d := newDispatcher(t)
	d.Apply([]Spec{{Name: "retry", URL: r.URL, Secret: secret, Events: []string{EventBlockListHit}}})
	d.Call(call("block_list", 0, "+1"))
	testkit.WaitFor(t, 5*time.Second, "delivered on the third attempt", func() bool { ev, _ := r.got(); return len(ev) == 1 })
	if f := d.Failing(); len(f) != 0 {
		t.Errorf("Failing() = %v", f)
	}

	gone := newReceiver(t, secret, 410)
	d.Apply([]Spec{{Name: "gone", URL: gone.URL, Secret: secret, Events: []string{EventBlockListHit}}})
	d.Call(call("block_list", 0, "+2"))
	testkit.WaitFor(t, 5*time.Second, "a 410 fails at once", func() bool { return d.Failing()["gone"] != "" })
	if !strings.Contains(d.Failing()["gone"], "after 1 attempt(s): refused: HTTP 410") {
		t.Errorf("Failing() = %v", d.Failing())
	}

	res := d.Test(t.Context(), Spec{Name: "wrong", URL: r.URL, Secret: "not-the-secret-key"})
	if res.Delivered || res.Status != 401 {
		t.Errorf("test event with a wrong secret: %+v", res)
	}
	res = d.Test(t.Context(), Spec{Name: "right", URL: r.URL, Secret: secret})
	if !res.Delivered || res.Status != 204 || res.Event.Type != EventTest {
		t.Errorf("test event: %+v", res)
	}
}

// A webhook that cannot keep up drops, counted; a call never waits.
func TestFullQueueDrops(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	d, err := New(Config{Queue: 10, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Apply([]Spec{{Name: "slow", URL: srv.URL, Events: []string{EventRateLimited}}})
	start := time.Now()
	for i := range 100 {
		d.Call(call("rate_limit", 0, strings.Repeat("1", i+1)))
	}
	if took := time.Since(start); took > 20*time.Millisecond {
		t.Errorf("100 calls took %s", took)
	}
	w := d.workers["slow"]
	if got := testutil.ToFloat64(w.dropped); got < 80 {
		t.Errorf("dropped %v of 100 with a queue of 10", got)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{Name: "Bad Name", URL: "http://x", Events: []string{EventRuleHit}}, "name"},
		{Spec{Name: "a", URL: "ftp://x", Events: []string{EventRuleHit}}, "url"},
		{Spec{Name: "a", URL: "http://x"}, "events"},
		{Spec{Name: "a", URL: "http://x", Events: []string{"everything"}}, "events[0]"},
		{Spec{Name: "a", URL: "http://x", Events: []string{EventRuleHit}, Secret: "short"}, "secret"},
		{Spec{Name: "a", URL: "http://x", Events: []string{EventRuleHit}, ThrottleSeconds: -1}, "throttle_seconds"},
	} {
		err := c.s.Validate()
		var fe *FieldError
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want on %s", c.s, err, c.want)
		} else if !errors.As(err, &fe) {
			t.Errorf("not a FieldError: %v", err)
		}
	}
}
