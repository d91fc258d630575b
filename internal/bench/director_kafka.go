package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

// kafkaCounter is the third-party consumer of a kafka feed: a franz-go
// consumer of the feed's output topic that counts copies by x-signalbox-seq
// and measures latency from the copy's metadata timestamp.
type kafkaCounter struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	ignore string // warm-up run id
	once   sync.Once

	mu    sync.Mutex
	start time.Time
	rep   probe.Report
	seen  map[string]*bitset // "run/nf" → seq numbers seen
	hist  *hdrhistogram.Histogram
}

// bitset is a growable set of small positive integers (seq numbers are dense).
type bitset struct{ w []uint64 }

// add reports whether n is new.
func (b *bitset) add(n int64) bool {
	i := int(n >> 6)
	for i >= len(b.w) {
		b.w = append(b.w, make([]uint64, len(b.w)+1)...)
	}
	m := uint64(1) << (n & 63)
	if b.w[i]&m != 0 {
		return false
	}
	b.w[i] |= m
	return true
}

func startKafkaCounter(ctx context.Context, brokers, topic, ignoreRun string, readCommitted bool) (*kafkaCounter, error) {
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		return nil, fmt.Errorf("bench director: kafka consumer: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = createTopic(cctx, cl, topic)
	cancel()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("bench director: create topic %s: %w", topic, err)
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	k := &kafkaCounter{cl: cl, cancel: rcancel, done: make(chan struct{}), ignore: ignoreRun, start: time.Now(),
		seen: map[string]*bitset{}, hist: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
		rep: probe.Report{Mode: "kafka", PerNF: map[string]int64{}, InvalidReasons: map[string]int64{}}}
	go k.loop(rctx)
	return k, nil
}

func (k *kafkaCounter) loop(ctx context.Context) {
	defer close(k.done)
	var c nfcopy.Copy
	for {
		fs := k.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		k.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			k.record(&c, r.Value, now)
		})
		k.mu.Unlock()
	}
}

// record counts one copy; k.mu is held.
func (k *kafkaCounter) record(c *nfcopy.Copy, v []byte, now time.Time) {
	if err := nfcopy.Decode(v, c); err != nil {
		k.rep.Invalid++
		k.rep.InvalidReasons["decode"]++
		if len(k.rep.FirstErrors) < 5 {
			k.rep.FirstErrors = append(k.rep.FirstErrors, err.Error())
		}
		return
	}
	seq := c.Header("x-signalbox-seq")
	i := strings.LastIndexByte(seq, '/')
	n, err := strconv.ParseInt(seq[i+1:], 10, 64)
	if i <= 0 || err != nil || n <= 0 {
		k.rep.NoSeq++
		return
	}
	key := seq[:i]
	if run, _, _ := strings.Cut(key, "/"); run == k.ignore {
		k.rep.Warmup++
		return
	}
	k.rep.Received++
	k.rep.Bytes += int64(len(v))
	k.rep.Body += int64(len(c.Body))
	if c.Timestamp > 0 {
		_ = k.hist.RecordValue(max((now.UnixNano()-c.Timestamp)/1000, 1))
	}
	b := k.seen[key]
	if b == nil {
		b = &bitset{}
		k.seen[strings.Clone(key)] = b
	}
	if !b.add(n) {
		k.rep.Duplicates++
		return
	}
	k.rep.Unique++
	nf := c.NFType
	if _, ok := k.rep.PerNF[nf]; !ok {
		nf = strings.Clone(nf)
	}
	k.rep.PerNF[nf]++
}

func (k *kafkaCounter) report() probe.Report {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := k.rep
	r.Elapsed = time.Since(k.start).Seconds()
	r.PerNF = map[string]int64{}
	for nf, n := range k.rep.PerNF {
		r.PerNF[nf] = n
	}
	h := k.hist
	r.Latency = probe.Latency{Count: h.TotalCount(), Avg: h.Mean(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P95: h.ValueAtQuantile(95), P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
	return r
}

func (k *kafkaCounter) close() {
	k.once.Do(func() {
		k.cancel()
		<-k.done
		k.cl.Close()
	})
}
