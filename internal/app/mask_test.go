package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// TestMaskedNumbers: with -mask-numbers 4 a blocked call's numbers leave
// the node masked on every output — the CALLS stream (and a file feed of
// it), a webhook's payload, the call log's answers to a viewer, the log at
// debug level — while the admin (-mask-numbers-reveal) sees them whole in
// the call log. The xdr feeds' records carry the GPSI masked, and are found
// by it.
func TestMaskedNumbers(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		hooks []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	cfg := testConfig(t, t.TempDir(), true)
	cfg.CallsTopic, cfg.MaskNumbers, cfg.MaskNumbersReveal, cfg.LogLevel = "CALLS", 4, "admin", "debug"
	logs := &lockedBuffer{}
	s, err := Start(context.Background(), cfg, logs)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, logs.String())
	}
	defer s.Shutdown()

	lake := t.TempDir()
	createFeed(t, s, `{"name":"lake","type":"file","sources":["CALLS"],"file":{"dir":"`+lake+`","rotate_seconds":1}}`)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/webhooks", `{"name":"noc","url":"` + recv.URL + `/hook","events":["block_list_hit"]}`},
		{"POST", "/api/v1/policies/default/lists/block/entries", `{"calling":"9725550199"}`},
	} {
		if code, b := apiDo(t, s, c.method, c.path, c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, b)
		}
	}
	code, b := apiDo(t, s, "POST", "/api/v1/tokens", `{"name":"helpdesk","role":"viewer"}`)
	var viewer struct{ Token string }
	if err := json.Unmarshal(b, &viewer); code != 201 || err != nil {
		t.Fatalf("viewer token: %d %s", code, b)
	}
	cucm := dialCUCM(t, s.CURRIAddr())
	testkit.WaitFor(t, 10*time.Second, "the block list live", func() bool {
		_, body := cucm.do("POST", "/curri/default", xacmlRequest("9725550199", "4695550123"))
		return decisionOf(t, body) == "Deny"
	})

	const whole, masked = "9725550199", "xxxxxx0199"
	// The call log: whole to the admin, masked to the viewer, found by
	// the number either way.
	testkit.WaitForState(t, 10*time.Second, "the call logged", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/calls?number="+whole, "")
		return strings.Contains(string(b), `"calling":"`+whole+`"`) && strings.Contains(string(b), `"transformed_calling":"+1`+whole+`"`), string(b)
	})
	code, b = apiAs(t, s, viewer.Token, "GET", "/api/v1/calls?number="+whole, "")
	if code != 200 || !strings.Contains(string(b), `"calling":"`+masked+`"`) || !strings.Contains(string(b), `"called":"xxxxxx0123"`) ||
		!strings.Contains(string(b), `"transformed_calling":"+xxxxxxx0199"`) || strings.Contains(string(b), whole) {
		t.Errorf("the viewer's call log: %d %s", code, b)
	}
	// CALLS, as the console's live view reads it, and a file feed of it.
	testkit.WaitForState(t, 10*time.Second, "CALLS", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/calls/stream?limit=10", "")
		return strings.Contains(string(b), `"calling":"`+masked+`"`), string(b)
	})
	if _, b := apiDo(t, s, "GET", "/api/v1/calls/stream?limit=10", ""); strings.Contains(string(b), whole) {
		t.Errorf("CALLS holds the whole number: %s", b)
	}
	testkit.WaitForState(t, 15*time.Second, "the lake's records", func() (bool, string) {
		files, _ := filepath.Glob(filepath.Join(lake, "lake-*.jsonl"))
		var all strings.Builder
		for _, f := range files {
			b, _ := os.ReadFile(f)
			all.Write(b)
		}
		if strings.Contains(all.String(), whole) {
			t.Fatalf("the file feed wrote the whole number: %s", all.String())
		}
		return strings.Contains(all.String(), `"calling":"`+masked+`"`), all.String()
	})
	// The webhook's payload.
	testkit.WaitForState(t, 10*time.Second, "the block-list webhook", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(hooks) > 0, ""
	})
	mu.Lock()
	for _, h := range hooks {
		if strings.Contains(h, whole) || !strings.Contains(h, `"calling":"`+masked+`"`) {
			t.Errorf("webhook payload: %s", h)
		}
	}
	mu.Unlock()

	// xDRs: the GPSI masked in the records, and a search by a whole GPSI
	// finds them by its masked form.
	createFeed(t, s, `{"name":"tx","type":"xdr","sources":["SCP","NRF","SEPP"],"topic":"XDR","xdr":{"timeout":"2s","linger":"100ms"}}`)
	produceCopies(t, context.Background(), s.KafkaAddrs(), "mask", 2000, 3000)
	gpsi := regexp.MustCompile(`"gpsi":"(msisdn-[^"]*)"`)
	var found string
	testkit.WaitForState(t, 30*time.Second, "records with a GPSI", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/feeds/tx/records?limit=100", "")
		for _, m := range gpsi.FindAllStringSubmatch(string(b), -1) {
			if !regexp.MustCompile(`^msisdn-x{8}[0-9]{4}$`).MatchString(m[1]) {
				t.Fatalf("a record's GPSI %s, want msisdn-4477009xxxxx masked to its last 4 digits", m[1])
			}
			found = m[1]
		}
		return found != "", fmt.Sprintf("%.300s", b)
	})
	// nfsim's GPSIs are msisdn-4477009 and 5 digits: any whole one that
	// ends as the masked one does.
	wholeGPSI := "4477009" + "0" + found[len(found)-4:]
	testkit.WaitForState(t, 10*time.Second, "the search by a whole GPSI", func() (bool, string) {
		_, b := apiDo(t, s, "GET", "/api/v1/xdrs?since=-1h&gpsi="+wholeGPSI, "")
		return strings.Contains(string(b), `"gpsi":"`+found+`"`) && !strings.Contains(string(b), "4477009"), fmt.Sprintf("%.300s", b)
	})
	if l := logs.String(); strings.Contains(l, whole) {
		t.Errorf("the log holds the whole number:\n%s", grepLines(l, whole))
	}
}
