// Package ingest is the HTTP/2 entry for NFs that cannot produce to Kafka:
// it validates their message copies and produces them into the topic of
// their NF type, answering only once Kafka has acknowledged them.
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/semaphore"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Config configures the ingest handler.
type Config struct {
	Topics []broker.TopicSpec // NF type -> topic of the same name
	// ThirdPartyTopic takes the copies of NF types without a topic of their
	// own (AMF, SMF, a vendor's NF); default broker.ThirdPartyTopic when it is
	// among Topics, else such copies are refused.
	ThirdPartyTopic string
	MaxBodyBytes    int64 // whole request; default 64 MiB
	// MaxInFlightBytes bounds the bodies of all requests being read and
	// produced at once (HTTP/2 multiplexes hundreds of requests on one
	// connection): a request that would pass it is answered 503, to be
	// sent again; default 4 x MaxBodyBytes.
	MaxInFlightBytes int64
	MaxRecordBytes   int           // one copy; default 1 MiB (the broker's record limit)
	Timeout          time.Duration // wait for broker acknowledgements; default 10s
	Logger           *slog.Logger
	// Registerer receives signalbox_ingest_copies_total{topic} and
	// signalbox_ingest_rejected_total{code}; nil = no metrics.
	Registerer prometheus.Registerer
}

type ingest struct {
	cl     *kgo.Client
	cfg    Config
	topics map[string]string // NF type (upper case) -> topic
	// diameter is broker.DiameterTopic when it is among the topics: where
	// Diameter copies go. Without it they go by NF type like SBI copies.
	diameter string
	pool     sync.Pool
	budget   *semaphore.Weighted // MaxInFlightBytes, taken as bodies arrive

	accepted *prometheus.CounterVec
	rejected *prometheus.CounterVec
	inFlight prometheus.Gauge // bytes of the budget taken
}

// NewHandler serves POST /v1/copies for NFs that cannot speak Kafka:
// one JSON copy (application/json) or many (application/x-ndjson). Every
// copy is validated first; a bad one rejects the whole request (400 naming
// the line) and nothing is produced. 200 {"accepted":N} is written only after
// Kafka acknowledged every copy. Serve it over h2 or h2c.
func NewHandler(cl *kgo.Client, cfg Config) http.Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.MaxInFlightBytes <= 0 {
		cfg.MaxInFlightBytes = 4 * cfg.MaxBodyBytes
	}
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = 1 << 20
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	in := &ingest{cl: cl, cfg: cfg, topics: map[string]string{}, budget: semaphore.NewWeighted(cfg.MaxInFlightBytes)}
	for _, t := range cfg.Topics {
		if t.Name != broker.DLQTopic {
			in.topics[strings.ToUpper(t.Name)] = t.Name
		}
		if t.Name == broker.DiameterTopic {
			in.diameter = t.Name
		}
	}
	if in.cfg.ThirdPartyTopic == "" {
		if _, ok := in.topics[broker.ThirdPartyTopic]; ok {
			in.cfg.ThirdPartyTopic = broker.ThirdPartyTopic
		}
	}
	in.pool.New = func() any { return new(nfcopy.Copy) }
	in.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_ingest_copies_total",
		Help: "Copies accepted over HTTP/2 ingest and acknowledged by Kafka."}, []string{"topic"})
	in.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_ingest_rejected_total",
		Help: "Ingest requests refused, by HTTP status."}, []string{"code"})
	in.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "signalbox_ingest_body_bytes_in_flight",
		Help: "Bytes of request bodies the ingest holds (read, or being produced), of the 4 x 64 MiB it may hold at once."})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{in.accepted, in.rejected, in.inFlight} {
			if err := cfg.Registerer.Register(c); err != nil {
				cfg.Logger.Error("ingest metrics", "err", err)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/copies", in.serve)
	return mux
}

type ingestError struct {
	Error string `json:"error"`
	Line  int    `json:"line,omitempty"`
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (in *ingest) serve(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		if code >= 400 {
			in.rejected.WithLabelValues(strconv.Itoa(code)).Inc()
		}
		writeJSON(w, code, v)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	ndjson := ct == "application/x-ndjson"
	if !ndjson && ct != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, ingestError{Error: "content type must be application/json or application/x-ndjson"})
		return
	}
	body, held, err := in.readBody(w, r)
	defer in.release(held)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			writeJSON(w, http.StatusRequestEntityTooLarge, ingestError{Error: fmt.Sprintf("body exceeds %d bytes", in.cfg.MaxBodyBytes)})
		case errors.Is(err, errBusy):
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, ingestError{Error: err.Error()})
		default:
			writeJSON(w, http.StatusBadRequest, ingestError{Error: "read body: " + err.Error()})
		}
		return
	}
	var lines [][]byte
	if ndjson {
		for l := range bytes.SplitSeq(body, []byte{'\n'}) {
			lines = append(lines, bytes.TrimSpace(l))
		}
	} else {
		lines = [][]byte{bytes.TrimSpace(body)}
	}
	recs := make([]*kgo.Record, 0, len(lines))
	c := in.pool.Get().(*nfcopy.Copy)
	defer in.pool.Put(c)
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		line := i + 1
		if len(l) > in.cfg.MaxRecordBytes {
			writeJSON(w, http.StatusRequestEntityTooLarge, ingestError{Error: fmt.Sprintf("copy of %d bytes exceeds %d", len(l), in.cfg.MaxRecordBytes), Line: line})
			return
		}
		if err := nfcopy.Decode(l, c); err != nil {
			// A copy that lacks what packets and xDRs need (no :status, an
			// unknown direction) is still a copy: feeds that relay records
			// deliver it. Only what is not a copy is refused.
			var de *nfcopy.DecodeError
			if !errors.As(err, &de) || !de.Incomplete || c.NFType == "" && in.cfg.ThirdPartyTopic == "" {
				e := ingestError{Error: err.Error(), Line: line}
				if de != nil {
					e.Field = de.Field
				}
				writeJSON(w, http.StatusBadRequest, e)
				return
			}
		}
		topic, ok := in.topics[strings.ToUpper(c.NFType)]
		if c.Protocol == nfcopy.DiameterProtocol {
			topic, ok = in.diameter, in.diameter != "" // a Diameter copy, whatever NF made it
		}
		if !ok {
			topic = in.cfg.ThirdPartyTopic // a third-party NF: the topic of all those
		}
		if topic == "" {
			writeJSON(w, http.StatusBadRequest, ingestError{Error: fmt.Sprintf("nf-type %q has no topic, and there is no third-party topic (%s)", c.NFType, broker.ThirdPartyTopic), Line: line, Field: "metadata-list.feed-source.nf-type"})
			return
		}
		rec := &kgo.Record{Topic: topic, Value: l}
		if c.CorrelationID != "" {
			rec.Key = []byte(c.CorrelationID)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		writeJSON(w, http.StatusBadRequest, ingestError{Error: "no copies in body"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), in.cfg.Timeout)
	defer cancel()
	// The records alias body, which outlives ProduceSync.
	if err := in.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		code := http.StatusServiceUnavailable
		if broker.IsTooLarge(err) {
			code = http.StatusRequestEntityTooLarge
		}
		in.cfg.Logger.Warn("ingest: produce", "err", err, "copies", len(recs))
		writeJSON(w, code, ingestError{Error: "kafka: " + err.Error()})
		return
	}
	for _, rec := range recs {
		in.accepted.WithLabelValues(rec.Topic).Inc()
	}
	writeJSON(w, http.StatusOK, map[string]int{"accepted": len(recs)})
}

// errBusy is a body that would take the bodies being read past
// MaxInFlightBytes.
var errBusy = errors.New("the ingest holds as many request bodies as it may at once: send again")

// readBody reads the body, up to MaxBodyBytes, taking its size from the
// in-flight budget as it arrives (its Content-Length at once when it has
// one); held is what it took, to give back when the request is done.
func (in *ingest) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	rd := http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes)
	if n := r.ContentLength; n > 0 && n <= in.cfg.MaxBodyBytes {
		if !in.take(n) {
			return nil, 0, fmt.Errorf("%w (%d bytes of bodies)", errBusy, in.cfg.MaxInFlightBytes)
		}
		body = make([]byte, n)
		_, err = io.ReadFull(rd, body)
		if err == nil { // nothing past the declared length
			var one [1]byte
			if m, _ := rd.Read(one[:]); m > 0 {
				err = errors.New("body longer than its Content-Length")
			}
		}
		return body, n, err
	}
	// No length: the buffer doubles (from 32 KiB, to MaxBodyBytes at
	// most), each size taken from the budget before it is allocated.
	for {
		if len(body) == cap(body) {
			more := min(max(held, 32<<10), in.cfg.MaxBodyBytes+1-held)
			if !in.take(more) {
				return nil, held, fmt.Errorf("%w (%d bytes of bodies)", errBusy, in.cfg.MaxInFlightBytes)
			}
			held += more
			grown := make([]byte, len(body), held)
			copy(grown, body)
			body = grown
		}
		m, rerr := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+m]
		if rerr == io.EOF {
			return body, held, nil
		}
		if rerr != nil {
			return nil, held, rerr
		}
	}
}

// take takes n bytes from the in-flight budget, if it has them.
func (in *ingest) take(n int64) bool {
	if !in.budget.TryAcquire(n) {
		return false
	}
	in.inFlight.Add(float64(n))
	return true
}

// release gives n bytes back to the in-flight budget.
func (in *ingest) release(n int64) {
	in.budget.Release(n)
	in.inFlight.Sub(float64(n))
}
