package nfsim

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: cfg.TLSInsecure, MinVersion: tls.VersionTLS12}
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("nfsim: tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("nfsim: tls ca %s: no PEM certificates", cfg.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// kafkaSender produces to the NF type's topic, unkeyed or keyed by
// correlation id (Config.Key).
type kafkaSender struct {
	byTopic map[string]*kgo.Client // one per NF type's topic, or one for all (SharedProducer)
	all     []*kgo.Client
	keyed   bool
	rtt     *rttHook
}

// rttHook times produce requests on the wire (written to response read,
// kgo.BrokerE2E.DurationE2E) once timing is on: with the ack latency, it
// tells the broker's share (the round trip) from the records' wait in the
// producer for a request to carry them (franz-go keeps one produce request
// in flight per broker with idempotence).
type rttHook struct {
	timing atomic.Bool
	h      *latencyHist
}

func (r *rttHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == 0 && e2e.Err() == nil && r.timing.Load() { // 0: Produce
		r.h.record(e2e.DurationE2E())
	}
}

// latencyHist is a histogram of durations (µs, up to a minute) that any
// goroutine may record into.
type latencyHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newLatencyHist() *latencyHist {
	return &latencyHist{h: hdrhistogram.New(1, 60_000_000, 2)}
}

func (l *latencyHist) record(d time.Duration) {
	us := min(max(1, d.Microseconds()), 60_000_000)
	l.mu.Lock()
	_ = l.h.RecordValue(us) // in range: never an error
	l.mu.Unlock()
}

// summary is the histogram in milliseconds.
func (l *latencyHist) summary() AckLatency {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	return AckLatency{N: h.TotalCount(), P50: float64(h.ValueAtQuantile(50)) / 1000,
		P99: float64(h.ValueAtQuantile(99)) / 1000, P999: float64(h.ValueAtQuantile(99.9)) / 1000,
		Max: float64(h.Max()) / 1000}
}

// compressionCodec maps a -compression name to the producer codec.
func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "", "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "none":
		return kgo.NoCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("nfsim: compression %q: want snappy, lz4, zstd, gzip or none", name)
}

func newKafkaSender(cfg Config, nfs []*nfState) (*kafkaSender, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.MaxBufferedRecords(100000),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.AllowAutoTopicCreation(),
	}
	codec, err := compressionCodec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if cfg.TLS {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if cfg.SASLMechanism != "" {
		var m sasl.Mechanism
		switch strings.ToUpper(cfg.SASLMechanism) {
		case "PLAIN":
			m = plain.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: cfg.SASLUser, Pass: cfg.SASLPassword}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("nfsim: sasl mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", cfg.SASLMechanism)
		}
		opts = append(opts, kgo.SASL(m))
	}
	rtt := &rttHook{h: newLatencyHist()}
	opts = append(opts, kgo.WithHooks(rtt))
	k := &kafkaSender{keyed: cfg.Key == "correlation", rtt: rtt, byTopic: map[string]*kgo.Client{}}
	for _, nf := range nfs {
		topic := nf.topic
		if k.byTopic[topic] != nil {
			continue
		}
		if cfg.SharedProducer && len(k.all) > 0 {
			k.byTopic[topic] = k.all[0]
			continue
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			k.close()
			return nil, fmt.Errorf("nfsim: kafka client: %w", err)
		}
		k.byTopic[topic] = cl
		k.all = append(k.all, cl)
	}
	return k, nil
}

func (k *kafkaSender) send(ctx context.Context, nf *nfState, key string, rec []byte, done func(error)) {
	r := &kgo.Record{Topic: nf.topic, Value: rec}
	if k.keyed {
		r.Key = []byte(key)
	}
	k.byTopic[nf.topic].Produce(ctx, r, func(_ *kgo.Record, err error) { done(err) })
}

func (k *kafkaSender) endTick(context.Context) {} // kgo lingers and batches itself

func (k *kafkaSender) flush(ctx context.Context) error {
	for _, cl := range k.all {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (k *kafkaSender) close() {
	for _, cl := range k.all {
		cl.Close()
	}
}

// httpSender POSTs batches of records as application/x-ndjson over HTTP/2.
// Records are gathered per tick and handed to a few workers, not one
// goroutine per message.
type httpSender struct {
	url     string
	client  *http.Client
	mu      sync.Mutex
	batch   *ndBatch
	work    chan *ndBatch
	wg      sync.WaitGroup
	maxRecs int
	size    int
	free    chan *ndBatch // posted batches for reuse; a sync.Pool would be emptied by every GC
	closed  bool
}

type ndBatch struct {
	buf   bytes.Buffer
	dones []func(error)
}

func newHTTPSender(cfg Config) (*httpSender, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 8, ForceAttemptHTTP2: true}
	var p http.Protocols
	switch {
	case strings.HasPrefix(cfg.Ingest, "http://"):
		p.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	case strings.HasPrefix(cfg.Ingest, "https://"):
		p.SetHTTP2(true)
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	default:
		return nil, fmt.Errorf("nfsim: ingest %q: want an http:// or https:// URL", cfg.Ingest)
	}
	tr.Protocols = &p
	h := &httpSender{url: cfg.Ingest, client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		work: make(chan *ndBatch, 64), free: make(chan *ndBatch, 80), maxRecs: 256, size: cfg.Size}
	for range 4 {
		h.wg.Add(1)
		go h.worker()
	}
	return h, nil
}

func (h *httpSender) worker() {
	defer h.wg.Done()
	for b := range h.work {
		err := h.post(b)
		for _, d := range b.dones {
			d(err)
		}
		b.buf.Reset()
		clear(b.dones)
		b.dones = b.dones[:0]
		select {
		case h.free <- b:
		default:
		}
	}
}

func (h *httpSender) post(b *ndBatch) error {
	resp, err := h.client.Post(h.url, "application/x-ndjson", bytes.NewReader(b.buf.Bytes()))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("ingest answered %s", resp.Status)
	}
	return nil
}

func (h *httpSender) send(ctx context.Context, _ *nfState, _ string, rec []byte, done func(error)) {
	h.mu.Lock()
	if h.batch == nil {
		select {
		case h.batch = <-h.free:
		default:
			h.batch = &ndBatch{}
		}
	}
	h.batch.buf.Write(rec)
	h.batch.buf.WriteByte('\n')
	h.batch.dones = append(h.batch.dones, done)
	var full *ndBatch
	if len(h.batch.dones) >= h.maxRecs {
		full, h.batch = h.batch, nil
	}
	h.mu.Unlock()
	if full != nil {
		h.dispatch(ctx, full)
	}
}

func (h *httpSender) dispatch(ctx context.Context, b *ndBatch) {
	select {
	case h.work <- b:
	case <-ctx.Done():
		for _, d := range b.dones {
			d(ctx.Err())
		}
	}
}

// endTick posts the tick's partial batch so a low rate does not wait for a
// full one.
func (h *httpSender) endTick(ctx context.Context) {
	h.mu.Lock()
	b := h.batch
	h.batch = nil
	h.mu.Unlock()
	if b != nil {
		h.dispatch(ctx, b)
	}
}

// flush posts the partial batch and waits for every post.
func (h *httpSender) flush(ctx context.Context) error {
	h.endTick(ctx)
	h.stopWorkers()
	return nil
}

func (h *httpSender) close() {
	h.stopWorkers()
	h.client.CloseIdleConnections()
}

// stopWorkers ends the workers once they have posted what is queued, once.
func (h *httpSender) stopWorkers() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.work)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
