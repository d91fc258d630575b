package director

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

var testTopics = []broker.TopicSpec{
	{Name: "SCP", Partitions: 4}, {Name: "NRF", Partitions: 2},
	{Name: broker.DLQTopic, Partitions: 1}, {Name: "probe.out", Partitions: 2},
}

func startBroker(t *testing.T, cfg broker.Config) *broker.Broker {
	t.Helper()
	cfg.Addr = ""
	if cfg.Topics == nil {
		cfg.Topics = testTopics
	}
	return kafkatest.StartBroker(t, cfg)
}

// producer writes copies with ids prefix-0..n-1 alternating SCP and NRF.
func produce(t *testing.T, cl *kgo.Client, prefix string, from, to int, pace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := from; i < to; {
		var recs []*kgo.Record
		for j := 0; j < 50 && i < to; j, i = j+1, i+1 {
			nf := "SCP"
			if i%3 == 0 {
				nf = "NRF"
			}
			recs = append(recs, &kgo.Record{Topic: nf, Value: fixture.Record(fmt.Sprintf("%s-%d", prefix, i), nf, nfcopy.RequestIngress)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Errorf("produce: %v", err)
			return
		}
		if pace > 0 {
			time.Sleep(pace)
		}
	}
}

// receiver is a small TCP consumer: it reads lines of correlation ids and
// acknowledges each batch ("ok\n" after an empty line), so the test sink's
// Send returns only once the receiver has the batch.
type receiver struct {
	t    *testing.T
	addr string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	seen  map[string]int
	total int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, seen: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *receiver) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			if r.ln != ln { // stopped between Accept and here
				r.mu.Unlock()
				c.Close()
				return
			}
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			go r.handle(c)
		}
	}()
}

func (r *receiver) handle(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	var batch []string
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return
		}
		l = strings.TrimSuffix(l, "\n")
		if l != "" {
			batch = append(batch, l)
			continue
		}
		r.mu.Lock()
		for _, id := range batch {
			r.seen[id]++
			r.total++
		}
		r.mu.Unlock()
		batch = batch[:0]
		if _, err := c.Write([]byte("ok\n")); err != nil {
			return
		}
	}
}

// stop closes the listener and every connection (the consumer goes away).
func (r *receiver) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// restart listens again on the same address.
func (r *receiver) restart() {
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Errorf("receiver restart: %v", err)
		return
	}
	r.serve(ln)
}

func (r *receiver) counts() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen), r.total
}

func (r *receiver) missing(prefix string, n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for i := range n {
		id := prefix + "-" + strconv.Itoa(i)
		if r.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// tcpSink is the test feed's sink: lines to the receiver, acknowledged.
type tcpSink struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

func (s *tcpSink) Send(ctx context.Context, batch []*nfcopy.Copy) error {
	if s.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return err
		}
		s.conn, s.br = c, bufio.NewReader(c)
	}
	s.buf = appendBatchFrame(s.buf[:0], batch)
	_ = s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.conn.Write(s.buf); err != nil {
		s.Close()
		return err
	}
	if l, err := s.br.ReadString('\n'); err != nil || l != "ok\n" {
		s.Close()
		return fmt.Errorf("no ack: %v", err)
	}
	return nil
}

func (s *tcpSink) Close() error {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	return nil
}

// countTopic reads topic from the start until it has want distinct keys or
// 20 s have passed, returning distinct keys and total records.
func countTopic(t *testing.T, cc broker.ClientConfig, topic string, want int) (map[string]int, int) {
	t.Helper()
	r := kafkatest.NewReader(t, cc, []string{topic})
	r.For(20*time.Second, func(recs []*kgo.Record) bool { return len(kafkatest.Keys(recs)) >= want })
	return kafkatest.Keys(r.Records), len(r.Records)
}

// appendBatchFrame appends the test receivers' framing of a batch: one
// correlation id per line, then an empty line.
func appendBatchFrame(buf []byte, batch []*nfcopy.Copy) []byte {
	for _, c := range batch {
		buf = append(append(buf, c.CorrelationID...), '\n')
	}
	return append(buf, '\n')
}

// offlineManager is a Manager whose broker is unreachable: for what needs no
// Kafka (validation, a feed's own state).
func offlineManager(t testing.TB) *Manager {
	t.Helper()
	m, err := NewManager(Config{Client: broker.ClientConfig{Brokers: []string{"127.0.0.1:1"}}, Topics: broker.DefaultTopics()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.admin.Close() })
	return m
}

// outputReader counts the copies in a topic by correlation id (the key).
type outputReader struct {
	mu   chan struct{}
	seen map[string]int
}

func newOutputReader(t *testing.T, c *testCluster, topic string) *outputReader {
	return newOutputReaderIso(t, c, topic, kgo.ReadCommitted())
}

func newOutputReaderIso(t *testing.T, c *testCluster, topic string, iso kgo.IsolationLevel) *outputReader {
	t.Helper()
	return newOutputReaderBy(t, c, topic, iso, func(r *kgo.Record) string { return string(r.Key) })
}

// newOutputReaderBy is newOutputReaderIso counting records by key(r).
func newOutputReaderBy(t *testing.T, c *testCluster, topic string, iso kgo.IsolationLevel, key func(*kgo.Record) string) *outputReader {
	t.Helper()
	// Never reset once reading (see runTransactional): kfake answers a
	// leader election's epoch check so that a consumer resets to its reset
	// offset, and would count the log twice.
	cl, err := c.ClientConfig().NewClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	if err != nil {
		t.Fatal(err)
	}
	o := &outputReader{mu: make(chan struct{}, 1), seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				o.mu <- struct{}{}
				o.seen[key(r)]++
				<-o.mu
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return o
}

// counts is how many distinct ids with prefix were read, and how many
// more times than once.
func (o *outputReader) counts(prefix string) (unique, dups int) {
	o.mu <- struct{}{}
	defer func() { <-o.mu }()
	for k, v := range o.seen {
		if strings.HasPrefix(k, prefix) {
			unique++
			dups += v - 1
		}
	}
	return unique, dups
}
