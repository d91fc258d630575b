package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/testkit"
)

// syncBuffer is a log destination written by several goroutines.
type syncBuffer = testkit.SyncBuffer

// guardedBroker is a broker whose guard's timeouts are short, and its log.
func guardedBroker(t *testing.T, maxRequest int32) (*Broker, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := Config{Addr: "127.0.0.1:0", Topics: []TopicSpec{{Name: "SCP", Partitions: 1}}, MaxRequestBytes: maxRequest,
		Registerer: prometheus.NewRegistry(), timeouts: &timeouts{firstRequest: 400 * time.Millisecond, idle: time.Minute, stall: 400 * time.Millisecond}}
	b, err := Start(tctx(t, 20*time.Second), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, logs
}

// refused is the broker's count of refusals for reason.
func refused(b *Broker, reason string) float64 {
	return testutil.ToFloat64(b.guard.refused.WithLabelValues(reason))
}

// produceAndFetch proves the broker serves a Kafka client: a record
// produced and read back within a second each.
func produceAndFetch(t *testing.T, b *Broker, value string) {
	t.Helper()
	cl := client(t, b.ClientConfig(), kgo.ConsumeTopics("SCP"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	start := time.Now()
	if err := cl.ProduceSync(tctx(t, 5*time.Second), &kgo.Record{Topic: "SCP", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce beside the hostile clients: %v", err)
	}
	ctx := tctx(t, 5*time.Second)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("fetch beside the hostile clients: %v", ctx.Err())
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == value })
		if found {
			break
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a produce and a fetch took %s beside the hostile clients", d)
	}
}

// TestGuardRefusesWhatIsNotKafka: an HTTP request on the Kafka port gets
// an HTTP answer saying what it reached; a 2 GB request, a negative size
// and a TLS handshake on the plaintext listener are refused before
// anything is allocated; each closes its connection, is counted by reason
// and logged once a minute per client. Kafka clients are served all along.
func TestGuardRefusesWhatIsNotKafka(t *testing.T) {
	b, logs := guardedBroker(t, 100<<20)
	addr := b.ListenAddr()

	// An HTTP request, as a monitoring probe sends.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: signalbox\r\nUser-Agent: probe\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("HTTP on the Kafka port: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Kafka listener of signalbox's embedded broker") {
		t.Errorf("HTTP on the Kafka port: %d %s", resp.StatusCode, body)
	}
	c.Close()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	hostile := map[string][]byte{
		"2 GB request":  binary.BigEndian.AppendUint32(nil, 0x7fffffff),
		"negative size": binary.BigEndian.AppendUint32(nil, 0xffffffff),
		"HTTP":          []byte("POST /api/v1/site HTTP/1.1\r\n"),
		"TLS":           {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc},
		"HTTP/2":        []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
	}
	for name, first := range hostile {
		for range 20 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(first)
			c.Write(bytes.Repeat([]byte{'x'}, 64<<10)) // what follows would fill it
			if !testkit.ClosedWithin(c, 2*time.Second) {
				t.Errorf("%s: the connection stayed open", name)
			}
			c.Close()
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 64<<20 {
		t.Errorf("100 hostile requests allocated %d MiB", grew>>20)
	}
	for reason, want := range map[string]float64{RefusedTooLarge: 20, RefusedNotKafka: 81} {
		if got := refused(b, reason); got != want {
			t.Errorf("refused{reason=%s} = %v, want %v", reason, got, want)
		}
	}
	// Logged, once per client and reason.
	l := logs.String()
	if n := strings.Count(l, "reason=too_large"); n != 1 {
		t.Errorf("too_large logged %d times, want once a minute:\n%s", n, l)
	}
	for _, want := range []string{"client=127.0.0.1:", "over the 104857600 of -kafka-max-request-bytes", "reason=not_kafka"} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %q:\n%s", want, l)
		}
	}
	produceAndFetch(t, b, "after the hostile requests")
}

// TestGuardCutsOffSilentAndStalled: a connection that sends nothing, one
// that sends half a request size, and one that sends part of a request and
// stalls are closed after the timeouts; many clients trickling large
// requests from one address hold no more memory than one request: the
// rest are refused. Kafka clients are served meanwhile.
func TestGuardCutsOffSilentAndStalled(t *testing.T) {
	b, _ := guardedBroker(t, 32<<20)
	addr := b.ListenAddr()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	silent, half, part := dial(), dial(), dial()
	half.Write([]byte{0, 0})
	part.Write(binary.BigEndian.AppendUint32(nil, 1000))
	part.Write([]byte{0, 3, 0, 12})
	for name, c := range map[string]net.Conn{"silent": silent, "half a size": half, "part of a request": part} {
		if !testkit.ClosedWithin(c, 3*time.Second) {
			t.Errorf("%s: not closed", name)
		}
	}
	if refused(b, RefusedSilent) != 1 || refused(b, RefusedStalled) != 2 {
		t.Errorf("refused: silent %v, stalled %v; want 1 and 2", refused(b, RefusedSilent), refused(b, RefusedStalled))
	}

	// 20 connections each announcing a 30 MiB request and trickling it:
	// one address holds at most one request's worth (32 MiB).
	trickler := testkit.NewTrickler(100 * time.Millisecond)
	for range 20 {
		trickler.Add(dial(), binary.BigEndian.AppendUint32(nil, 30<<20))
	}
	testkit.WaitFor(t, 5*time.Second, "19 trickles refused for memory", func() bool { return refused(b, RefusedMemory) >= 19 })
	b.guard.mu.Lock()
	held := b.guard.held
	b.guard.mu.Unlock()
	if held > 32<<20 {
		t.Errorf("the trickling clients hold %d MiB, want at most 32", held>>20)
	}
	produceAndFetch(t, b, "beside the trickles")
	trickler.Stop()
}
