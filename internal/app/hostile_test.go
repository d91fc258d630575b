package app

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// TestListenersSurviveHostileInput is every port of a serve (the binary,
// as an operator runs it: director, embedded broker, HTTP/2 ingest) probed
// as monitoring and a hostile client would: HTTP requests and 2 GB frames
// on the Kafka port, 2 GB bodies announced and trickled to CURRI, the API
// and the ingest, an HTTP/2 frame announcing 16 MB, and hundreds of
// connections holding half a header on each. serve's heap stays bounded, it
// stays up, every listener answers a legitimate request within a second
// meanwhile, and the broker's refusals are counted and logged.
func TestListenersSurviveHostileInput(t *testing.T) {
	testkit.Long(t, "over a thousand hostile connections against the binary")
	t.Parallel()
	dir := t.TempDir()
	logf := filepath.Join(dir, "serve.log")
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0",
		"-curri-addr", "127.0.0.1:0", "-kafka-addr", "127.0.0.1:0", "-ingest-addr", "127.0.0.1:0",
		"-admin-token", "test-admin-token", "-kafka-topics", "SCP=2,NRF=1,SEPP=1", "-log-level", "info"}, logf)
	ls := serve.ls
	heap := func() float64 {
		_, m := get(t, "http://"+ls.HTTP+"/metrics")
		return metricValue(m, "go_memstats_heap_alloc_bytes")
	}
	before := heap()

	var open []net.Conn
	var mu sync.Mutex
	dial := func(addr string) net.Conn {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
		return c
	}
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	// Trickled: the announced request goes on arriving, a byte every
	// 100 ms, until the server closes the connection or the test ends.
	trickler := testkit.NewTrickler(100 * time.Millisecond)
	defer trickler.Stop()

	// The Kafka port: HTTP requests (monitoring, a peer URL pointed at it),
	// 2 GB frames followed by what would fill them, half a size.
	kafkaClosed := make(chan bool, 40)
	for i := range 20 {
		c := dial(ls.Kafka)
		io.WriteString(c, "GET /api/v1/site HTTP/1.1\r\nHost: "+ls.Kafka+"\r\nAuthorization: Bearer x\r\n\r\n")
		c2 := dial(ls.Kafka)
		c2.Write(binary.BigEndian.AppendUint32(nil, 0x7fffffff))
		c2.Write(bytes.Repeat([]byte{byte(i)}, 256<<10))
		for _, cc := range []net.Conn{c, c2} {
			go func() { kafkaClosed <- testkit.ClosedWithin(cc, 5*time.Second) }()
		}
	}
	for range 300 {
		dial(ls.Kafka).Write([]byte{0, 0})
	}
	// CURRI, the API and the ingest: 2 GB bodies announced and trickled,
	// and 300 connections each holding half a header.
	for _, l := range []struct{ name, addr, head string }{
		{"curri", ls.CURRI, "POST /curri/default HTTP/1.1\r\nHost: pdp\r\nContent-Type: text/xml\r\nContent-Length: 2147483648\r\n\r\n"},
		{"api", ls.HTTP, "PUT /api/v1/policies/default/rules HTTP/1.1\r\nHost: sb\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n["},
		{"ingest", ls.Ingest, "POST /v1/copies HTTP/1.1\r\nHost: sb\r\nContent-Type: application/x-ndjson\r\nContent-Length: 2147483648\r\n\r\n"},
	} {
		for range 20 {
			trickler.Add(dial(l.addr), []byte(l.head))
		}
		for range 300 {
			io.WriteString(dial(l.addr), l.head[:20])
		}
	}
	// An HTTP/2 frame announcing 16 MB on the ingest (h2c, prior
	// knowledge), and a DATA frame as large on a stream it never opened.
	h2 := dial(ls.Ingest)
	io.WriteString(h2, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	h2.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})          // SETTINGS, empty
	h2.Write([]byte{0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1}) // DATA of 16 MB on stream 1
	h2.Write(bytes.Repeat([]byte{'x'}, 64<<10))
	h2Closed := testkit.ClosedWithin(h2, 5*time.Second)

	// Meanwhile every listener answers a legitimate request within a second.
	legit := func() {
		t.Helper()
		check := func(what string, f func() error) {
			t.Helper()
			start := time.Now()
			if err := f(); err != nil {
				t.Errorf("%s beside the hostile clients: %v", what, err)
			} else if d := time.Since(start); d > time.Second {
				t.Errorf("%s beside the hostile clients took %s", what, d)
			}
		}
		check("CURRI call", func() error {
			c := dialCUCM(t, ls.CURRI)
			resp, body := c.do("POST", "/curri/default", xacmlRequest("9725550101", "4085550199"))
			if resp.StatusCode != 200 || !strings.Contains(body, "<Decision>") {
				return fmt.Errorf("%d %.200s", resp.StatusCode, body)
			}
			return nil
		})
		check("API", func() error {
			if c, body := apiAtQuiet(ls.HTTP, "test-admin-token", "GET", "/api/v1/version"); c != 200 {
				return fmt.Errorf("%d %s", c, body)
			}
			return nil
		})
		check("ingest", func() error {
			resp, err := http.Post("http://"+ls.Ingest+"/v1/copies", "application/json",
				bytes.NewReader(fixture.Record("legit", "SCP", nfcopy.RequestIngress)))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				return fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return nil
		})
		check("Kafka produce and fetch", func() error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(ls.Kafka), kgo.ConsumeTopics("NRF"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "NRF", Value: fixture.Record("k", "NRF", nfcopy.RequestIngress)}).FirstErr(); err != nil {
				return err
			}
			if fs := cl.PollFetches(ctx); fs.NumRecords() == 0 {
				return fmt.Errorf("fetched nothing: %v", fs.Err())
			}
			return nil
		})
	}
	legit()
	for range 40 {
		if !<-kafkaClosed {
			t.Error("a Kafka connection that sent HTTP or a 2 GB frame stayed open")
		}
	}
	if !h2Closed {
		t.Error("the ingest kept the connection that announced a 16 MB HTTP/2 frame")
	}
	after := heap()
	t.Logf("serve's heap: %.0f MiB before, %.0f MiB with %d hostile connections", before/(1<<20), after/(1<<20), len(open))
	if after > 512<<20 {
		t.Errorf("serve's heap reached %.0f MiB beside the hostile clients, want under 512 MiB", after/(1<<20))
	}
	_, m := get(t, "http://"+ls.HTTP+"/metrics")
	for reason, want := range map[string]float64{"not_kafka": 20, "too_large": 20} {
		if got := metricValue(m, `signalbox_kafka_refused_total{reason="`+reason+`"}`); got < want {
			t.Errorf("signalbox_kafka_refused_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	log := serve.tail(1 << 20)
	if n := strings.Count(log, "kafka connection refused"); n < 2 || n > 4 {
		t.Errorf("the refusals logged %d times, want once per client and reason a minute (2 or 3)", n)
	}
	// Still up, and still answering, at the end.
	legit()
}

// metricValue is the value of the sample named name (with its labels,
// exactly as exposed) in a /metrics page; -1 when absent.
func metricValue(page, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
