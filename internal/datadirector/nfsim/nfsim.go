// Package nfsim simulates 5G network functions (SCP, NRF, SEPP, ...) copying
// realistic SBI traffic into Kafka or to an HTTP/2 ingest, paced at a target
// rate. Every copy carries x-signalbox-seq so a probe can count losses and
// duplicates, and its metadata timestamp is the send time so end-to-end
// latency is measurable.
package nfsim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMix is the seed benchmark's traffic mix (16K SCP, 5K NRF, 9K SEPP).
func DefaultMix() map[string]float64 {
	return map[string]float64{"SCP": 16000, "NRF": 5000, "SEPP": 9000}
}

// Config is one simulator run.
type Config struct {
	Brokers  []string           // Kafka bootstrap brokers
	Ingest   string             // URL of an HTTP/2 ingest (alternative to Kafka)
	Rate     float64            // total copies per second; 0 = as fast as possible
	Mix      map[string]float64 // NF type → weight (proportions); nil = DefaultMix
	Size     int                // every record padded to exactly this many bytes (0 = 3000)
	Duration time.Duration      // stop after this long (0 = no limit)
	Count    int64              // stop after this many copies in total (0 = no limit)
	Topics   map[string]string  // NF type → topic; missing = the NF type's name
	RunID    string             // prefix of x-signalbox-seq; "" = random
	Progress time.Duration      // progress line interval (0 = 5s)

	// Compression of produced batches: snappy (default, kgo's own), lz4,
	// zstd, gzip or none.
	Compression string
	// SharedProducer sends every NF type's copies through one Kafka
	// client; by default each NF type has its own, as each is its own
	// network function with its own producer, connections and produce
	// requests in flight.
	SharedProducer bool
	// Linger is how long the producer waits for more copies of a partition
	// before sending its batch; 0 sends at once (the client still batches
	// whatever arrives while its requests are in flight), which is what a
	// latency-sensitive NF does.
	Linger time.Duration
	// Key is the Kafka record key: "none" (the default) leaves copies
	// unkeyed, so the producer fills one partition per batch (Kafka's
	// sticky default, the reference benchmark's "round-robin based
	// ordering"); "correlation" keys them by correlation id, so a
	// transaction stays in one partition, at the price of spreading each
	// tick's copies over every partition (batches of one or two copies).
	Key string
	// Prewarm, with a Kafka producer and a paced rate, sends copies under
	// PrewarmRunID at the rate for this long, and waits for them to be
	// acknowledged, before the run's clock starts: a fresh process and its
	// client warm up on those instead of the run's first copies.
	Prewarm      time.Duration
	PrewarmRunID string

	SASLMechanism string // PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; "" = none
	SASLUser      string
	SASLPassword  string
	TLS           bool
	TLSCAFile     string
	TLSInsecure   bool
}

// RegisterFlags registers the simulator's flags on fs, writing into c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("brokers", "Kafka bootstrap brokers, comma-separated (signalbox nfsim: 127.0.0.1:9092 without -ingest)", func(s string) error {
		c.Brokers = splitList(s)
		return nil
	})
	fs.StringVar(&c.Ingest, "ingest", c.Ingest, "URL of an HTTP/2 ingest (h2c for http://), instead of Kafka")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "total copies per second (0 = as fast as possible)")
	fs.Func("mix", "NF mix as TYPE=weight,... (default SCP=16000,NRF=5000,SEPP=9000)", func(s string) error {
		m, err := ParseMix(s)
		c.Mix = m
		return err
	})
	fs.IntVar(&c.Size, "size", c.Size, "record size in bytes (padded; 0 = 3000)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "run for this long (0 = until -count or interrupted)")
	fs.Int64Var(&c.Count, "count", c.Count, "total copies to send (0 = no limit)")
	fs.Func("topics", "NF type to topic as TYPE=topic,... (default: the NF type)", func(s string) error {
		m, err := ParseMap(s)
		c.Topics = m
		return err
	})
	fs.StringVar(&c.RunID, "run-id", c.RunID, "run id in x-signalbox-seq (default random)")
	fs.StringVar(&c.Compression, "compression", c.Compression, "Kafka batch compression: snappy (default), lz4, zstd, gzip or none")
	fs.BoolVar(&c.SharedProducer, "shared-producer", c.SharedProducer, "one Kafka client for every NF type (default: one per NF type, as separate NFs have)")
	fs.DurationVar(&c.Linger, "linger", c.Linger, "Kafka producer linger per partition (0: send at once, batching only what queues behind in-flight requests)")
	fs.StringVar(&c.Key, "key", c.Key, "Kafka record key: none (default; the producer's sticky partitioning) or correlation (correlation id: a transaction stays in one partition)")
	fs.DurationVar(&c.Prewarm, "prewarm", c.Prewarm, "send paced copies under -prewarm-run-id for this long before the run starts (Kafka only)")
	fs.StringVar(&c.PrewarmRunID, "prewarm-run-id", c.PrewarmRunID, "run id of the -prewarm copies")
	fs.StringVar(&c.SASLMechanism, "sasl-mechanism", c.SASLMechanism, "Kafka SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
	fs.StringVar(&c.SASLUser, "sasl-user", c.SASLUser, "Kafka SASL user")
	fs.StringVar(&c.SASLPassword, "sasl-password", c.SASLPassword, "Kafka SASL password")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "use TLS to Kafka (and for https:// ingest)")
	fs.StringVar(&c.TLSCAFile, "tls-ca", c.TLSCAFile, "CA file (PEM) to verify the server")
	fs.BoolVar(&c.TLSInsecure, "tls-insecure", c.TLSInsecure, "skip server certificate verification")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseMix parses "SCP=16000,NRF=5000" into weights; weights must be > 0.
func ParseMix(s string) (map[string]float64, error) {
	m := map[string]float64{}
	for _, p := range splitList(s) {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("mix %q: want TYPE=weight", p)
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("mix %q: weight must be a positive number", p)
		}
		m[k] = w
	}
	if len(m) == 0 {
		return nil, errors.New("mix: empty")
	}
	return m, nil
}

// ParseMap parses "A=x,B=y".
func ParseMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range splitList(s) {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%q: want KEY=value", p)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, nil
}

// Stats is what a run did.
type Stats struct {
	RunID    string
	Sent     map[string]int64 // per NF type, acknowledged by Kafka / the ingest
	Errors   int64            // copies not delivered
	Oversize int64            // records that came out larger than Size
	Elapsed  time.Duration
	Prewarm  int64   // -prewarm copies acknowledged (not in Sent)
	Rate     float64 // achieved copies per second
	FirstErr string
	// Ack is the time from making a copy (its timestamp) to Kafka's (or
	// the ingest's) acknowledgement, over the run's copies (not the
	// first or -prewarm copies): the producing side's share of the
	// end-to-end latency.
	Ack AckLatency
	// ProduceRTT is the produce requests' round trips over the same
	// span (Kafka only; N counts requests, not copies).
	ProduceRTT AckLatency
}

// AckLatency summarises acknowledgement times in milliseconds.
type AckLatency struct {
	N                   int64
	P50, P99, P999, Max float64
}

// Total is the number of copies delivered.
func (s Stats) Total() int64 {
	var n int64
	for _, v := range s.Sent {
		n += v
	}
	return n
}

// nfState is one NF type's generator and counters.
type nfState struct {
	name  string
	topic string
	rate  float64 // copies per second
	quota int64   // copies to send in total (-1: unlimited)
	gen   *gen
	made  int64        // generated
	sent  atomic.Int64 // acknowledged
}

// Quotas splits count over the mix by the largest-remainder method, so the
// per-NF counts are exact and sum to count.
func Quotas(mix map[string]float64, count int64) map[string]int64 {
	names := sortedKeys(mix)
	var sum float64
	for _, n := range names {
		sum += mix[n]
	}
	out := map[string]int64{}
	type rem struct {
		name string
		frac float64
	}
	var rems []rem
	var given int64
	for _, n := range names {
		exact := float64(count) * mix[n] / sum
		q := int64(exact)
		out[n] = q
		given += q
		rems = append(rems, rem{n, exact - float64(q)})
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].frac > rems[j].frac })
	for i := 0; given < count; i++ {
		out[rems[i%len(rems)].name]++
		given++
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sender delivers encoded records; done is called once per record with its
// outcome, from any goroutine.
type sender interface {
	send(ctx context.Context, nf *nfState, key string, rec []byte, done func(error))
	endTick(ctx context.Context) // the records of one tick are all handed over
	flush(ctx context.Context) error
	close()
}

// Run simulates the NFs until Count copies are sent, Duration passes or ctx
// ends, printing progress to out every few seconds and a summary at the end.
func Run(ctx context.Context, cfg Config, out io.Writer) (Stats, error) {
	if err := cfg.normalize(); err != nil {
		return Stats{}, err
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	var quotas map[string]int64
	if cfg.Count > 0 {
		quotas = Quotas(cfg.Mix, cfg.Count)
	}
	base := binary.LittleEndian.Uint64(seed[:])
	nfs := newNFStates(&cfg, cfg.RunID, quotas, func(i int) uint64 { return base + uint64(i) })

	var snd sender
	var err error
	if cfg.Ingest != "" {
		snd, err = newHTTPSender(cfg)
	} else {
		snd, err = newKafkaSender(cfg, nfs)
	}
	if err != nil {
		return Stats{}, err
	}
	defer snd.close()
	r := &runner{cfg: &cfg, snd: snd, ack: newLatencyHist(),
		pool: sync.Pool{New: func() any { b := make([]byte, 0, cfg.Size+256); return &b }}}

	if err := r.connect(ctx, nfs); err != nil {
		return Stats{}, err
	}
	var prewarmed int64
	if cfg.Prewarm > 0 {
		// Other seeds than the run's NFs: the prewarm's copies are its own.
		pre := newNFStates(&cfg, cfg.PrewarmRunID, nil, func(i int) uint64 { return base ^ uint64(i+1)<<40 })
		if prewarmed, err = r.prewarm(ctx, pre); err != nil {
			return Stats{}, err
		}
	}
	start := time.Now()
	r.measure(ctx, nfs, start, out)
	// Deliver what is in flight even when the run's time is up.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	ferr := snd.flush(flushCtx)
	cancel()

	st := r.stats(nfs, time.Since(start), prewarmed)
	printSummary(out, cfg, st)
	if ferr != nil {
		return st, fmt.Errorf("nfsim: flush: %w", ferr)
	}
	if st.Errors > 0 {
		return st, fmt.Errorf("nfsim: %d copies not delivered (first: %s)", st.Errors, st.FirstErr)
	}
	return st, nil
}

// normalize checks cfg and fills in its defaults.
func (cfg *Config) normalize() error {
	if (len(cfg.Brokers) == 0) == (cfg.Ingest == "") {
		return errors.New("nfsim: set exactly one of brokers and ingest")
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		return fmt.Errorf("nfsim: rate %v: must be >= 0", cfg.Rate)
	}
	if cfg.Count < 0 || cfg.Duration < 0 || cfg.Size < 0 {
		return errors.New("nfsim: count, duration and size must not be negative")
	}
	if cfg.Size == 0 {
		cfg.Size = 3000
	}
	if cfg.Mix == nil {
		cfg.Mix = DefaultMix()
	}
	for k, w := range cfg.Mix {
		if !(w > 0) {
			return fmt.Errorf("nfsim: mix %s: weight must be positive", k)
		}
	}
	switch cfg.Key {
	case "":
		cfg.Key = "none"
	case "none", "correlation":
	default:
		return fmt.Errorf("nfsim: key %q: want none or correlation", cfg.Key)
	}
	if cfg.Prewarm < 0 || cfg.Prewarm > 0 && (cfg.Ingest != "" || cfg.Rate == 0 || cfg.PrewarmRunID == "" ||
		strings.Contains(cfg.PrewarmRunID, "/") || cfg.PrewarmRunID == cfg.RunID) {
		return errors.New("nfsim: -prewarm needs Kafka, a rate, and a -prewarm-run-id (without '/') other than the run's")
	}
	if cfg.Progress <= 0 {
		cfg.Progress = 5 * time.Second
	}
	if cfg.RunID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.RunID = hex.EncodeToString(b[:])
	}
	if strings.Contains(cfg.RunID, "/") {
		return fmt.Errorf("nfsim: run id %q must not contain '/'", cfg.RunID)
	}
	return nil
}

// newNFStates returns one state per NF type of the mix, in name order, with
// its share of the rate and of quotas (nil: none), the i-th generator seeded
// with seed(i).
func newNFStates(cfg *Config, runID string, quotas map[string]int64, seed func(i int) uint64) []*nfState {
	var sum float64
	for _, w := range cfg.Mix {
		sum += w
	}
	var nfs []*nfState
	for i, name := range sortedKeys(cfg.Mix) {
		topic := cfg.Topics[name]
		if topic == "" {
			topic = name
		}
		quota := int64(-1)
		if quotas != nil {
			quota = quotas[name] // 0 when the count is smaller than the mix
		}
		nfs = append(nfs, &nfState{name: name, topic: topic, rate: cfg.Rate * cfg.Mix[name] / sum,
			quota: quota, gen: newGen(name, runID, seed(i))})
	}
	return nfs
}

// more reports whether nf has copies left to make.
func (nf *nfState) more() bool { return nf.quota < 0 || nf.made < nf.quota }

// runner is what the phases of a run share: the sender, the record buffers,
// and the tallies of acknowledged copies.
type runner struct {
	cfg       *Config
	snd       sender
	pool      sync.Pool
	errs      atomic.Int64
	firstErr  atomic.Pointer[string]
	oversize  int64
	measuring atomic.Bool // the run's own copies: their acks are timed
	ack       *latencyHist
}

// produce makes nf's next copy and hands it to the sender.
func (r *runner) produce(ctx context.Context, nf *nfState) {
	c := nf.gen.nextCopy()
	bp := r.pool.Get().(*[]byte)
	made := time.Now()
	timed := r.measuring.Load()
	rec, over := nf.gen.appendRecord((*bp)[:0], c, made.UnixNano(), r.cfg.Size)
	if over {
		r.oversize++
	}
	*bp = rec
	nf.made++
	r.snd.send(ctx, nf, c.CorrelationID, rec, func(err error) {
		if err != nil {
			if r.errs.Add(1) == 1 {
				s := fmt.Sprintf("%s: %v", nf.name, err)
				r.firstErr.Store(&s)
			}
		} else {
			nf.sent.Add(1)
			if timed {
				r.ack.record(time.Since(made))
			}
		}
		r.pool.Put(bp)
	})
}

// connect has a Kafka NF connected before it has traffic to copy: its
// first copy of each type is sent alone and acknowledged before the clock
// starts, so that the connection, the topics' metadata and the producer id
// are not paid for by the first paced copies.
func (r *runner) connect(ctx context.Context, nfs []*nfState) error {
	ks, ok := r.snd.(*kafkaSender)
	if !ok {
		return nil
	}
	for _, nf := range nfs {
		if nf.more() {
			r.produce(ctx, nf)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := ks.flush(wctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("nfsim: first copies: %w", err)
	}
	return nil
}

// prewarm sends the prewarm NFs' copies for cfg.Prewarm, unmeasured, and
// returns how many were acknowledged.
func (r *runner) prewarm(ctx context.Context, pre []*nfState) (int64, error) {
	if err := pace(ctx, pre, r.cfg.Prewarm, func(nf *nfState) { r.produce(ctx, nf) }, r.snd); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := r.snd.flush(wctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("nfsim: prewarm: %w", err)
	}
	return sumSent(pre), nil
}

// measure is the measured phase: every NF's copies at its rate (or as fast
// as the sender takes them) until the quotas are sent, the duration passes
// or ctx ends, with progress lines to out.
func (r *runner) measure(ctx context.Context, nfs []*nfState, start time.Time, out io.Writer) {
	cfg := r.cfg
	runCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	r.measuring.Store(true)
	if ks, ok := r.snd.(*kafkaSender); ok {
		ks.rtt.timing.Store(true)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	nextProgress := start.Add(cfg.Progress)
	var lastTotal int64
	lastAt := start
	for {
		now := time.Now()
		elapsed := now.Sub(start).Seconds()
		finished := true
		for _, nf := range nfs {
			due := int64(math.MaxInt64)
			if cfg.Rate > 0 {
				due = int64(nf.rate * elapsed)
			} else {
				due = nf.made + 256 // unpaced: a batch per NF per round
			}
			if nf.quota >= 0 && due > nf.quota {
				due = nf.quota
			}
			for nf.made < due {
				if runCtx.Err() != nil {
					return
				}
				// The parent ctx, not runCtx: copies made before the
				// deadline still go.
				r.produce(ctx, nf)
			}
			if nf.more() {
				finished = false
			}
		}
		r.snd.endTick(ctx)
		if finished {
			return
		}
		if now.After(nextProgress) {
			total := sumSent(nfs)
			fmt.Fprintf(out, "nfsim %s: sent %d (%.0f/s), errors %d\n", cfg.RunID, total,
				float64(total-lastTotal)/now.Sub(lastAt).Seconds(), r.errs.Load())
			lastTotal, lastAt = total, now
			nextProgress = now.Add(cfg.Progress)
		}
		if cfg.Rate > 0 {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		} else if runCtx.Err() != nil {
			return
		}
	}
}

// stats is the run's outcome.
func (r *runner) stats(nfs []*nfState, elapsed time.Duration, prewarmed int64) Stats {
	st := Stats{RunID: r.cfg.RunID, Sent: map[string]int64{}, Errors: r.errs.Load(), Oversize: r.oversize, Elapsed: elapsed,
		Prewarm: prewarmed}
	for _, nf := range nfs {
		st.Sent[nf.name] = nf.sent.Load()
	}
	if p := r.firstErr.Load(); p != nil {
		st.FirstErr = *p
	}
	st.Ack = r.ack.summary()
	if ks, ok := r.snd.(*kafkaSender); ok {
		st.ProduceRTT = ks.rtt.h.summary()
	}
	if secs := st.Elapsed.Seconds(); secs > 0 {
		st.Rate = float64(st.Total()) / secs
	}
	return st
}

// pace produces nfs' copies at their rates for d: every copy due by d,
// even when the process ran late (a tick that came after d sends what was
// due until d; before, it sent nothing, and a prewarm of a starved process
// could be empty).
func pace(ctx context.Context, nfs []*nfState, d time.Duration, produce func(*nfState), snd sender) error {
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		el := min(time.Since(start), d)
		for _, nf := range nfs {
			for due := int64(nf.rate * el.Seconds()); nf.made < due; {
				produce(nf)
			}
		}
		snd.endTick(ctx)
		if el >= d {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func sumSent(nfs []*nfState) int64 {
	var n int64
	for _, nf := range nfs {
		n += nf.sent.Load()
	}
	return n
}

func printSummary(out io.Writer, cfg Config, st Stats) {
	fmt.Fprintf(out, "nfsim %s: done in %s\n", st.RunID, st.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  %-8s %12s\n", "NF", "sent")
	for _, k := range sortedKeys(st.Sent) {
		fmt.Fprintf(out, "  %-8s %12d\n", k, st.Sent[k])
	}
	fmt.Fprintf(out, "  %-8s %12d\n  errors %d, oversize %d, size %d B, achieved %.0f copies/s (target %.0f)\n",
		"total", st.Total(), st.Errors, st.Oversize, cfg.Size, st.Rate, cfg.Rate)
	printLatency(out, "ack latency", st.Ack, "; copy made to acknowledged")
	printLatency(out, "produce round trip", st.ProduceRTT, " requests; written to response read")
	if st.Prewarm > 0 {
		fmt.Fprintf(out, "  prewarm %d copies under run id %s\n", st.Prewarm, cfg.PrewarmRunID)
	}
	if st.FirstErr != "" {
		fmt.Fprintf(out, "  first error: %s\n", st.FirstErr)
	}
}

// printLatency writes "  LABEL ms: p50 X  p99 X  p99.9 X  max X  (n=N...)",
// the line bench director reads back; nothing when l is empty.
func printLatency(out io.Writer, label string, l AckLatency, note string) {
	if l.N > 0 {
		fmt.Fprintf(out, "  %s ms: p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (n=%d%s)\n", label, l.P50, l.P99, l.P999, l.Max, l.N, note)
	}
}
