package api

import (
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric names the stats snapshot reads. They belong to their packages
// (curri, director, the process collector); a name missing from the
// registry simply leaves its part of the snapshot empty.
const (
	mCURRIRequests   = "signalbox_curri_requests_total"
	mCURRIDuration   = "signalbox_curri_request_duration_seconds"
	mCURRIErrors     = "signalbox_curri_errors_total"
	mTopicCopies     = "signalbox_kafka_topic_copies_total" // every copy written to an NF topic, by any producer
	mXDRTransactions = "signalbox_xdr_transactions_total"
	mXDRFailures     = "signalbox_xdr_failures_total"
	mIngestReject    = "signalbox_ingest_rejected_total"
	mCopyInvalid     = "signalbox_copy_invalid_total"
	mFeedDelivered   = "signalbox_feed_delivered_total"
	mFeedFailures    = "signalbox_feed_failures_total"
	mFeedLost        = "signalbox_feed_lost_total"
	mFeedLag         = "signalbox_feed_lag"
	mFeedConnected   = "signalbox_feed_connected"
	mFeedLatency     = "signalbox_feed_e2e_latency_seconds"
	mProcCPU         = "process_cpu_seconds_total"
	mProcRSS         = "process_resident_memory_bytes"
	mProcStart       = "process_start_time_seconds"
	mGoroutines      = "go_goroutines"
	mAlarmsActive    = "signalbox_alarms_active"
)

// Stats is the compact snapshot GET /api/v1/stats answers. Counters are
// totals since the process started: the console computes rates from the
// difference between two polls, using Time.
type Stats struct {
	Time     time.Time      `json:"time"`
	UnixMS   int64          `json:"unix_ms"`
	CURRI    CURRIStats     `json:"curri"`
	Ingest   IngestStats    `json:"ingest"`
	Feeds    []FeedStats    `json:"feeds"`
	Process  ProcessStats   `json:"process"`
	Alarms   map[string]int `json:"alarms_active"` // by severity
	XDR      XDRStats       `json:"xdr"`
	Warnings []string       `json:"warnings,omitempty"`
}

// CURRIStats are the call-policy counters.
type CURRIStats struct {
	Requests   uint64            `json:"requests"`
	ByDecision map[string]uint64 `json:"by_decision"`
	ByPolicy   map[string]uint64 `json:"by_policy"`
	Errors     map[string]uint64 `json:"errors"` // by reason; zero reasons left out
	Latency    *Latency          `json:"latency,omitempty"`
}

// IngestStats count copies coming in. Copies counts the HTTP/2 ingest path
// per NF type (topic); copies produced straight into Kafka are not counted
// there.
type IngestStats struct {
	Copies   map[string]uint64 `json:"copies"`
	Rejected map[string]uint64 `json:"rejected"` // by HTTP status
	Invalid  uint64            `json:"invalid"`  // undecodable copies (dead-lettered)
}

// FeedStats is one director feed.
type FeedStats struct {
	Name      string   `json:"name"`
	Delivered uint64   `json:"delivered"`
	Failed    uint64   `json:"failed"`
	Lost      uint64   `json:"lost"`
	Lag       float64  `json:"lag"`
	Connected bool     `json:"connected"`
	Latency   *Latency `json:"latency,omitempty"`
}

// Latency summarises a histogram in seconds. The percentiles are over all
// observations since start; Buckets ([upper bound, cumulative count], +Inf
// left out) let a client compute them over the interval between two polls.
type Latency struct {
	Count   uint64       `json:"count"`
	Sum     float64      `json:"sum"`
	P50     *float64     `json:"p50"`
	P95     *float64     `json:"p95"`
	P99     *float64     `json:"p99"`
	Buckets [][2]float64 `json:"buckets"`
}

// ProcessStats is the process as the process collector sees it.
type ProcessStats struct {
	CPUSeconds  float64 `json:"cpu_seconds"`
	RSSBytes    float64 `json:"rss_bytes"`
	StartTime   float64 `json:"start_time"` // unix seconds
	Goroutines  float64 `json:"goroutines"`
	UptimeSecs  float64 `json:"uptime_seconds"`
	HasProcInfo bool    `json:"has_process_info"`
}

// XDRStats are the xdr feeds' KPIs since the process started: per
// service, transactions and failures; the failures by cause.
type XDRStats struct {
	Services []ServiceKPI      `json:"services"`
	Causes   map[string]uint64 `json:"causes"`
}

// ServiceKPI is one service's transactions and failures (4xx, 5xx, no
// response), summed over NF types and xdr feeds.
type ServiceKPI struct {
	Service      string  `json:"service"`
	Transactions uint64  `json:"transactions"`
	Failed       uint64  `json:"failed"`
	SuccessRatio float64 `json:"success_ratio"`
}

func (s *server) getStats(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Gatherer == nil {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Msg: "metrics are not available in this process"})
		return
	}
	writeJSON(w, http.StatusOK, computeStats(s.cfg.Gatherer, s.now()))
}

// computeStats reads one snapshot from g. A gathering error still yields
// what could be gathered (the registry returns partial results), with the
// error as a warning.
func computeStats(g prometheus.Gatherer, now time.Time) Stats {
	st := Stats{
		Time:   now.UTC(),
		UnixMS: now.UnixMilli(),
		CURRI: CURRIStats{
			ByDecision: map[string]uint64{},
			ByPolicy:   map[string]uint64{},
			Errors:     map[string]uint64{},
		},
		Ingest: IngestStats{Copies: map[string]uint64{}, Rejected: map[string]uint64{}},
		Feeds:  []FeedStats{},
		Alarms: map[string]int{},
		XDR:    XDRStats{Services: []ServiceKPI{}, Causes: map[string]uint64{}},
	}
	kpis := map[string]*ServiceKPI{}
	mfs, err := g.Gather()
	if err != nil {
		st.Warnings = append(st.Warnings, "gathering metrics: "+err.Error())
	}
	feeds := map[string]*FeedStats{}
	feed := func(m *dto.Metric) *FeedStats {
		name := label(m, "feed")
		f := feeds[name]
		if f == nil {
			f = &FeedStats{Name: name}
			feeds[name] = f
		}
		return f
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case mCURRIRequests:
				n := uint64(m.GetCounter().GetValue())
				st.CURRI.Requests += n
				st.CURRI.ByDecision[label(m, "decision")] += n
				st.CURRI.ByPolicy[label(m, "policy")] += n
			case mCURRIErrors:
				if n := uint64(m.GetCounter().GetValue()); n > 0 {
					st.CURRI.Errors[label(m, "reason")] += n
				}
			case mCURRIDuration:
				st.CURRI.Latency = latencyOf(m.GetHistogram())
			case mTopicCopies:
				st.Ingest.Copies[label(m, "topic")] += uint64(m.GetCounter().GetValue())
			case mIngestReject:
				st.Ingest.Rejected[label(m, "code")] += uint64(m.GetCounter().GetValue())
			case mCopyInvalid:
				st.Ingest.Invalid += uint64(m.GetCounter().GetValue())
			case mFeedDelivered:
				feed(m).Delivered = uint64(m.GetCounter().GetValue())
			case mFeedFailures:
				feed(m).Failed = uint64(m.GetCounter().GetValue())
			case mFeedLost:
				feed(m).Lost = uint64(m.GetCounter().GetValue())
			case mFeedLag:
				feed(m).Lag = m.GetGauge().GetValue()
			case mFeedConnected:
				feed(m).Connected = m.GetGauge().GetValue() > 0
			case mFeedLatency:
				feed(m).Latency = latencyOf(m.GetHistogram())
			case mProcCPU:
				st.Process.CPUSeconds = m.GetCounter().GetValue()
				st.Process.HasProcInfo = true
			case mProcRSS:
				st.Process.RSSBytes = m.GetGauge().GetValue()
			case mProcStart:
				st.Process.StartTime = m.GetGauge().GetValue()
			case mGoroutines:
				st.Process.Goroutines = m.GetGauge().GetValue()
			case mAlarmsActive:
				st.Alarms[label(m, "severity")] = int(m.GetGauge().GetValue())
			case mXDRTransactions:
				svc := label(m, "service")
				k := kpis[svc]
				if k == nil {
					k = &ServiceKPI{Service: svc}
					kpis[svc] = k
				}
				n := uint64(m.GetCounter().GetValue())
				k.Transactions += n
				if c := label(m, "status_class"); c == "4xx" || c == "5xx" || c == "timeout" {
					k.Failed += n
				}
			case mXDRFailures:
				st.XDR.Causes[label(m, "cause")] += uint64(m.GetCounter().GetValue())
			}
		}
	}
	if st.Process.StartTime > 0 {
		st.Process.UptimeSecs = math.Max(0, float64(now.UnixMilli())/1000-st.Process.StartTime)
	}
	for _, f := range feeds {
		st.Feeds = append(st.Feeds, *f)
	}
	for _, k := range kpis {
		if k.Transactions > 0 {
			k.SuccessRatio = 1 - float64(k.Failed)/float64(k.Transactions)
		}
		st.XDR.Services = append(st.XDR.Services, *k)
	}
	sort.Slice(st.XDR.Services, func(i, j int) bool { return st.XDR.Services[i].Transactions > st.XDR.Services[j].Transactions })
	sort.Slice(st.Feeds, func(i, j int) bool { return st.Feeds[i].Name < st.Feeds[j].Name })
	return st
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func latencyOf(h *dto.Histogram) *Latency {
	if h == nil {
		return nil
	}
	l := &Latency{Count: h.GetSampleCount(), Sum: h.GetSampleSum(), Buckets: [][2]float64{}}
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), +1) {
			continue
		}
		l.Buckets = append(l.Buckets, [2]float64{b.GetUpperBound(), float64(b.GetCumulativeCount())})
	}
	l.P50 = bucketQuantile(0.50, l.Buckets, l.Count)
	l.P95 = bucketQuantile(0.95, l.Buckets, l.Count)
	l.P99 = bucketQuantile(0.99, l.Buckets, l.Count)
	return l
}

// bucketQuantile estimates the q-quantile from cumulative buckets (finite
// upper bounds, ascending) and the total count, interpolating linearly
// inside the bucket that holds the rank, as Prometheus'
// histogram_quantile does. A rank beyond the last finite bound answers that
// bound (the estimate cannot be better); no observations answer nil.
func bucketQuantile(q float64, buckets [][2]float64, total uint64) *float64 {
	if total == 0 {
		return nil
	}
	rank := q * float64(total)
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		upper, cum := b[0], b[1]
		if cum >= rank && cum > below {
			v := lower + (upper-lower)*(rank-below)/(cum-below)
			return &v
		}
		lower, below = upper, cum
	}
	if len(buckets) == 0 {
		return nil
	}
	v := buckets[len(buckets)-1][0]
	return &v
}
