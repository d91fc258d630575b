package xdr

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// DefaultExpectedCopies is how many trigger points each NF type copies at:
// the SCP at four (request and response, ingress and egress), the others at
// their ingress and egress gateways (two). Types not listed expect two.
func DefaultExpectedCopies() map[string]int {
	return map[string]int{"SCP": 4, "NRF": 2, "SEPP": 2, "PCF": 2, "BSF": 2, "NON_ORACLE": 2}
}

// Config configures a Correlator. Zero values take the defaults.
type Config struct {
	// Timeout is how long a transaction waits for its missing copies after
	// its first copy arrived (arrival time, by Now). Default 5s.
	Timeout time.Duration
	// MaxPending bounds the transactions held; beyond it the oldest is
	// emitted early (Evicted) and counted. Default 200,000.
	MaxPending int
	// ExpectedCopies maps an NF type to the number of distinct trigger points
	// it copies at (see DefaultExpectedCopies, used when nil).
	ExpectedCopies map[string]int
	// Shards is the number of independently locked shards (default 16).
	Shards int
	// Registerer receives the metrics; nil registers none. Wrap it with a
	// feed label when several correlators share one registry.
	Registerer prometheus.Registerer
	// Linger holds a complete transaction this long before emitting it, for
	// copies from further NFs that arrive later (another topic lagging: the
	// NRF's copies after the SCP's). 0 emits at completion; copies arriving
	// after the emission are counted late and dropped.
	Linger time.Duration
	// Now is the clock for timeouts (default time.Now).
	Now func() time.Time
	// TrackOffsets keeps the offset of every copy added with AddFrom, for
	// Open: an exactly-once reader's checkpoint names them.
	TrackOffsets bool
	// MaskGPSI hides all but this many last digits of a record's GPSI
	// (msisdn-xxxxxx0101: nfcopy.MaskDigits); 0 keeps it whole.
	MaskGPSI int
}

// Correlator joins copies into Records. A transaction is COMPLETE, and its
// record emitted by the Add that completes it, when all of these hold:
//
//  1. it has at least one request copy and one response copy;
//  2. for every NF that copied it (one NF = one nf-instance-id, else
//     nf-fqdn), each request copy has its matching response copy:
//     REQUEST_INGRESS ↔ RESPONSE_EGRESS and REQUEST_EGRESS ↔ RESPONSE_INGRESS;
//  3. every such NF has copied at least ExpectedCopies[its type] distinct
//     trigger points (so an SCP waits for all four, even when its request
//     egress copy is late);
//  4. the producer of the transaction (producer-id, else producer-fqdn), if it
//     is an NF this correlator has seen copying, has copied too (so an SCP's
//     copies wait for the NRF's when the NRF is the producer).
//
// With Config.Linger, a complete transaction is held that long for copies of
// further NFs before its record goes out.
//
// Otherwise the transaction waits until Timeout after its first copy arrived;
// Expire then emits it as complete when 1 and 2 hold (an SCP that answered
// itself copies only two points), partial when it has responses but some
// pair is missing, response_timeout without responses, orphan_response
// without requests.
//
// Copies of an (NF, direction, hop-by-hop id) already held are duplicates:
// counted in the record and dropped. A copy of an (NF, direction) already
// held with another hop-by-hop id is a retry or reroute (an SCP trying
// another producer keeps the correlation id and takes a new hop-by-hop id):
// it is a hop of its own, counted in Retries. Copies arriving for a transaction already emitted
// (whatever its result), within Timeout of its emission, are counted as late
// and dropped rather than opening a second record. Copies without a
// correlation-id or a valid direction are dropped and counted.
//
// Add and Expire keep nothing of the copy: what a record holds is copied.
type Correlator struct {
	timeout  int64
	linger   int64
	track    bool // Config.TrackOffsets
	maskGPSI int  // Config.MaskGPSI
	maxShard int
	expected map[string]int
	now      func() time.Time
	shards   []shard
	mask     uint64
	// known holds the NF instance ids and FQDNs seen copying (rule 4). It is
	// read on every copy and written once per new NF: copy-on-write.
	known   atomic.Pointer[map[string]struct{}]
	knownMu sync.Mutex
	m       *metrics
	pending atomic.Int64
}

const maxKnownNFs = 4096

type shard struct {
	mu        sync.Mutex
	pending   map[string]*txn  // waiting and lingering
	waiting   txnList          // by arrival = timeout deadline order
	lingering txnList          // complete, by completion = linger deadline order
	tombs     map[string]int64 // emitted correlation-id → until (ns)
	tombQ     []tomb
	tombHead  int
	intern    map[string]string
	_         [64]byte // keep shards' locks on separate cache lines
}

type tomb struct {
	key   string
	until int64
	spans []srcOff // where the emitted transaction's copies were read (AddFrom)
}

// New returns a Correlator for cfg.
func New(cfg Config) (*Correlator, error) {
	if cfg.Linger < 0 || cfg.Timeout > 0 && cfg.Linger > cfg.Timeout {
		return nil, fmt.Errorf("xdr: linger %v: must be 0..timeout", cfg.Linger)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("xdr: timeout %v: must not be negative", cfg.Timeout)
	}
	if cfg.MaxPending < 0 {
		return nil, fmt.Errorf("xdr: max pending %d: must not be negative", cfg.MaxPending)
	}
	if cfg.Shards < 0 || cfg.Shards > 4096 {
		return nil, fmt.Errorf("xdr: shards %d: must be 0..4096", cfg.Shards)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = 200_000
	}
	if cfg.Shards == 0 {
		cfg.Shards = 16
	}
	if cfg.ExpectedCopies == nil {
		cfg.ExpectedCopies = DefaultExpectedCopies()
	}
	for t, n := range cfg.ExpectedCopies {
		if n < 1 || n > 4 {
			return nil, fmt.Errorf("xdr: expected copies for %q: %d: must be 1..4", t, n)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := 1 << bits.Len(uint(cfg.Shards-1)) // a power of two
	if n > cfg.MaxPending {
		n = 1 << (bits.Len(uint(cfg.MaxPending)) - 1)
	}
	x := &Correlator{
		timeout:  int64(cfg.Timeout),
		linger:   int64(cfg.Linger),
		track:    cfg.TrackOffsets,
		maskGPSI: cfg.MaskGPSI,
		maxShard: max(1, cfg.MaxPending/n),
		expected: maps(cfg.ExpectedCopies),
		now:      cfg.Now,
		shards:   make([]shard, n),
		mask:     uint64(n - 1),
	}
	x.known.Store(&map[string]struct{}{})
	for i := range x.shards {
		s := &x.shards[i]
		s.pending = make(map[string]*txn)
		s.tombs = make(map[string]int64)
		s.intern = make(map[string]string)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	x.m = m
	return x, nil
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Pending reports how many transactions are waiting.
func (x *Correlator) Pending() int { return int(x.pending.Load()) }

func (x *Correlator) shardOf(id string) *shard {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return &x.shards[h&x.mask]
}

// Add joins c into its transaction and appends to out the records that c
// completes, or that it pushed out of a full correlator (Evicted).
func (x *Correlator) Add(c *nfcopy.Copy, out []Record) []Record {
	return x.AddFrom(c, NoSource, 0, out)
}

// NoSource is the source of copies whose origin is not told (Add).
const NoSource = ^uint32(0)

// AddFrom is Add for a copy read from source src (the caller's number for,
// say, a Kafka partition) at offset off, which Drop and LowWater name.
func (x *Correlator) AddFrom(c *nfcopy.Copy, src uint32, off int64, out []Record) []Record {
	if c.CorrelationID == "" {
		x.m.dropped.Inc()
		return out
	}
	if c.Direction == nfcopy.DirUnknown || c.Direction > nfcopy.ResponseEgress {
		x.m.droppedDir.Inc()
		return out
	}
	x.learn(c)
	now := x.now().UnixNano()
	s := x.shardOf(c.CorrelationID)
	s.mu.Lock()
	if until, ok := s.tombs[c.CorrelationID]; ok {
		if until > now {
			s.mu.Unlock()
			x.m.late.Inc()
			return out
		}
		delete(s.tombs, c.CorrelationID)
	}
	t := s.pending[c.CorrelationID]
	if t == nil {
		if s.waiting.n+s.lingering.n >= x.maxShard {
			old := s.waiting.head
			if s.lingering.head != nil && (old == nil || s.lingering.head.deadline < old.deadline) {
				old = s.lingering.head
			}
			s.remove(old)
			x.pending.Add(-1)
			x.m.evictions.Inc()
			out = append(out, x.finish(s, old, now, true))
		}
		t = &txn{key: strings.Clone(c.CorrelationID), deadline: now + x.timeout,
			hops: make([]Hop, 0, 4), nfs: make([]nfPart, 0, 2)}
		s.pending[t.key] = t
		s.waiting.pushBack(t)
		x.pending.Add(1)
	}
	if !t.add(c, s) {
		x.m.duplicates.Inc()
	}
	if src != NoSource {
		t.from(src, off)
		if x.track {
			t.offs = append(t.offs, srcAt{src, off})
		}
	}
	if !t.lingers && x.completeNow(t) {
		if x.linger > 0 {
			s.waiting.remove(t)
			t.lingers, t.deadline = true, now+x.linger
			s.lingering.pushBack(t)
		} else {
			s.remove(t)
			x.pending.Add(-1)
			out = append(out, x.finish(s, t, now, false))
		}
	}
	s.mu.Unlock()
	return out
}

// Expire emits, appended to out, every transaction whose timeout has passed
// by now. Call it periodically (every Timeout/10 or so).
func (x *Correlator) Expire(now time.Time, out []Record) []Record {
	ns := now.UnixNano()
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for _, l := range []*txnList{&s.lingering, &s.waiting} {
			for l.head != nil && l.head.deadline <= ns {
				t := l.head
				s.remove(t)
				x.pending.Add(-1)
				out = append(out, x.finish(s, t, ns, false))
			}
		}
		for s.tombHead < len(s.tombQ) && s.tombQ[s.tombHead].until <= ns {
			tb := s.tombQ[s.tombHead]
			s.tombQ[s.tombHead] = tomb{}
			s.tombHead++
			if u, ok := s.tombs[tb.key]; ok && u == tb.until {
				delete(s.tombs, tb.key)
			}
		}
		if s.tombHead > 1024 && s.tombHead*2 > len(s.tombQ) {
			n := copy(s.tombQ, s.tombQ[s.tombHead:])
			clear(s.tombQ[n:])
			s.tombQ = s.tombQ[:n]
			s.tombHead = 0
		}
		s.mu.Unlock()
	}
	return out
}

// Drop forgets, without a record, every pending transaction that has a copy
// from a source gone(src) reports, and returns how many. A reader that gives
// up a partition to another (a rebalance) drops what it read of it: the new
// owner reads those copies again from the last commit and completes the
// transactions, which this correlator must not emit as partial. No
// tombstone is left: if the partition comes back, its copies are welcome.
func (x *Correlator) Drop(gone func(src uint32) bool) int {
	n := 0
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for _, l := range []*txnList{&s.lingering, &s.waiting} {
			for t := l.head; t != nil; {
				next := t.next
				if slices.ContainsFunc(t.srcs, func(so srcOff) bool { return gone(so.src) }) {
					s.remove(t)
					n++
				}
				t = next
			}
		}
		s.mu.Unlock()
	}
	x.pending.Add(-int64(n))
	x.m.handedOver.Add(float64(n))
	return n
}

// LowWater calls fn with the source and lowest offset of the copies of
// every pending transaction added with AddFrom. What a reader may commit of
// a source is below the lowest of them: the rest of what it read went into
// records already emitted.
func (x *Correlator) LowWater(fn func(src uint32, off int64)) {
	x.eachPending(func(t *txn) {
		for _, so := range t.srcs {
			fn(so.src, so.off)
		}
	})
}

// eachPending calls fn with every pending transaction, each shard locked
// in turn.
func (x *Correlator) eachPending(fn func(*txn)) {
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for _, l := range []*txnList{&s.lingering, &s.waiting} {
			for t := l.head; t != nil; t = t.next {
				fn(t)
			}
		}
		s.mu.Unlock()
	}
}

// Emitted calls fn with the source and the lowest and highest offsets of
// the copies of every transaction emitted within the last Timeout (while
// its tombstone stands). A reader must not commit inside such a span: a
// reader that took the source over from the last commit would read the
// transaction's later copies without its earlier ones, and no tombstone of
// it, and emit a second, partial record.
func (x *Correlator) Emitted(fn func(src uint32, lo, hi int64)) {
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for _, tb := range s.tombQ[s.tombHead:] {
			for _, so := range tb.spans {
				fn(so.src, so.off, so.max)
			}
		}
		s.mu.Unlock()
	}
}

// Flush emits every pending transaction as if its timeout had passed (at
// shutdown).
func (x *Correlator) Flush(out []Record) []Record {
	return x.Expire(time.Unix(0, 1<<63-1), out)
}

// learn remembers c's NF as one that copies, for rule 4.
func (x *Correlator) learn(c *nfcopy.Copy) {
	known := *x.known.Load()
	_, a := known[c.NFInstanceID]
	_, b := known[c.NFFQDN]
	if (a || c.NFInstanceID == "") && (b || c.NFFQDN == "") || len(known) >= maxKnownNFs {
		return
	}
	x.knownMu.Lock()
	defer x.knownMu.Unlock()
	old := *x.known.Load()
	m := make(map[string]struct{}, len(old)+2)
	for k := range old {
		m[k] = struct{}{}
	}
	for _, k := range [2]string{c.NFInstanceID, c.NFFQDN} {
		if k != "" {
			m[strings.Clone(k)] = struct{}{}
		}
	}
	x.known.Store(&m)
}

func (x *Correlator) isKnown(k string) bool {
	if k == "" {
		return false
	}
	_, ok := (*x.known.Load())[k]
	return ok
}

func (x *Correlator) expectedOf(nfType string) int {
	if n, ok := x.expected[nfType]; ok {
		return n
	}
	return 2
}

func (x *Correlator) completeNow(t *txn) bool {
	if !t.pairsMatched() {
		return false
	}
	for i := range t.nfs {
		p := &t.nfs[i]
		if bits.OnesCount8(p.seen) < x.expectedOf(p.nfType) {
			return false
		}
	}
	// Rule 4: a producer that copies must have copied.
	if t.producerID != "" && x.isKnown(t.producerID) {
		return t.hasNF(t.producerID)
	}
	if t.producerID == "" && t.producerFQDN != "" && x.isKnown(t.producerFQDN) {
		return t.hasNF(t.producerFQDN)
	}
	return true
}

func (x *Correlator) finish(s *shard, t *txn, now int64, evicted bool) Record {
	r := t.record()
	r.Evicted = evicted
	if x.maskGPSI > 0 {
		r.GPSI = nfcopy.MaskDigits(r.GPSI, x.maskGPSI) // msisdn- has no digit
		r.Path = maskMSISDNs(r.Path, x.maskGPSI)       // a GPSI as the UE's id: /nudm-sdm/v2/msisdn-.../sm-data
	}
	if until := now + x.timeout; len(s.tombs) < x.maxShard {
		s.tombs[t.key] = until
		s.tombQ = append(s.tombQ, tomb{t.key, until, t.srcs})
	}
	x.m.observe(&r)
	return r
}

// txnList is an intrusive doubly linked list of transactions.
type txnList struct {
	head, tail *txn
	n          int
}

func (l *txnList) pushBack(t *txn) {
	t.prev, t.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
	l.n++
}

func (l *txnList) remove(t *txn) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.prev, t.next = nil, nil
	l.n--
}

// remove takes t out of the shard.
func (s *shard) remove(t *txn) {
	if t.lingers {
		s.lingering.remove(t)
	} else {
		s.waiting.remove(t)
	}
	delete(s.pending, t.key)
}

// str returns an owned copy of v, shared with earlier equal values: NF names,
// FQDNs and methods repeat across millions of copies.
func (s *shard) str(v string) string {
	if v == "" {
		return ""
	}
	if o, ok := s.intern[v]; ok {
		return o
	}
	o := strings.Clone(v)
	if len(s.intern) < 4096 {
		s.intern[o] = o
	}
	return o
}

// maskMSISDNs masks the digits of every msisdn-<digits> in s but for the
// last keep of each.
func maskMSISDNs(s string, keep int) string {
	const prefix = "msisdn-"
	if !strings.Contains(s, prefix) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		i += len(prefix)
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		b.WriteString(s[:i])
		b.WriteString(nfcopy.MaskDigits(s[i:j], keep))
		s = s[j:]
	}
}
