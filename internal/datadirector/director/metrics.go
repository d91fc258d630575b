package director

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the director's Prometheus series, by the part they are of;
// per-feed series carry only the feed label and are deleted when the feed
// is removed.
type metrics struct {
	deliveryMetrics
	copyMetrics
	tapMetrics
	xdrMetrics
	captureMetrics
}

// deliveryMetrics are every feed's: what its sink confirmed, how, and how
// far behind.
type deliveryMetrics struct {
	delivered      *prometheus.CounterVec
	deliveredBytes *prometheus.CounterVec
	failures       *prometheus.CounterVec
	retries        *prometheus.CounterVec
	flowsEvicted   *prometheus.CounterVec
	responsesFirst *prometheus.CounterVec
	lost           *prometheus.CounterVec
	redelivered    *prometheus.CounterVec
	lag            *prometheus.GaugeVec
	connected      *prometheus.GaugeVec
	latency        *prometheus.HistogramVec
	undeliverable  *prometheus.CounterVec
}

// copyMetrics count what feeds do with the copies they read: undecodable,
// incomplete, reordered, passed or dropped by the filter (xdr feeds filter
// records).
type copyMetrics struct {
	invalid       *prometheus.CounterVec
	incomplete    *prometheus.CounterVec
	reordered     *prometheus.CounterVec
	filterMatched *prometheus.CounterVec
	filterDropped *prometheus.CounterVec
}

// tapMetrics are the shared readers' (taps'), by feed or by tap (source set).
type tapMetrics struct {
	tapDrops      *prometheus.CounterVec
	fencedCommits *prometheus.CounterVec // by tap (source set)
	tapRewinds    *prometheus.CounterVec // by tap (source set)
	tapRebalances *prometheus.CounterVec // by tap (source set)
}

// xdrMetrics are the xdr feeds'.
type xdrMetrics struct {
	records        *prometheus.CounterVec
	upstreamStalls *prometheus.CounterVec
	replayed       *prometheus.CounterVec
	checkpoints    *prometheus.CounterVec // by feed and outcome
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	feed := []string{"feed"}
	m := &metrics{captureMetrics: newCaptureMetrics()}
	m.delivered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_delivered_total",
		Help: "Copies the feed's sink confirmed."}, feed)
	m.deliveredBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_delivered_bytes_total",
		Help: "Raw record bytes of confirmed copies."}, feed)
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_failures_total",
		Help: "Failed sink sends (each is retried)."}, feed)
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_retries_total",
		Help: "Batches sent again after a failure."}, feed)
	m.flowsEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_flows_evicted_total",
		Help: "Flows a synthetic feed closed to make room in its flow table (packets.max_flows) for another; one that comes back is a new TCP connection to the probe."}, feed)
	m.responsesFirst = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_responses_first_total",
		Help: "Responses (and Diameter answers) a synthetic feed wrote before their request, which it had not yet read: each on a stream of its request's connection, where the request then goes."}, feed)
	m.lost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_lost_total",
		Help: "Copies deleted by retention before the feed delivered them."}, feed)
	m.redelivered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_redelivered_total",
		Help: "Copies delivered again after a restart or rebalance (at-least-once)."}, feed)
	m.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "signalbox_feed_lag",
		Help: "Copies in the feed's source topics not yet committed."}, feed)
	m.connected = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "signalbox_feed_connected",
		Help: "1 when the feed's last delivery succeeded."}, feed)
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "signalbox_feed_e2e_latency_seconds",
		Help:    "Delivery time minus the copy's timestamp.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30}}, feed)
	m.tapDrops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_shared_reader_drops_total",
		Help: "Times the feed's shared reader (tap) dropped it for taking no batch in time; it then reads on its own until it catches up."}, feed)
	m.fencedCommits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_tap_fenced_commits_total",
		Help: "Commit rounds a shared reader (tap) held back because its group did not confirm it as a member of the current generation (paused or cut off past its session timeout, or its group coordinator unreachable or refusing): what is not committed is committed later, or by its partitions' new owner."},
		[]string{"sources"})
	m.tapRewinds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_tap_rewinds_total",
		Help: "Times a shared reader (tap) moved back in partitions it holds: for a feed that joined it behind (instead of rejoining its group), or to read again a poll it could not hand out while its group membership was unproven."},
		[]string{"sources"})
	m.tapRebalances = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_tap_rebalances_total",
		Help: "Rebalances of a shared reader's (tap's) consumer group this node went through (each assignment it was given, including its first)."},
		[]string{"sources"})
	m.invalid = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_copy_invalid_total",
		Help: "Undecodable copies sent to the dead-letter topic."}, []string{"topic", "reason"})
	m.undeliverable = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_undeliverable_total",
		Help: "Copies the feed's sink can never deliver (over the target's size limit, HTTP 413), sent to the dead-letter topic."}, feed)
	m.incomplete = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_incomplete_copies_total",
		Help: "Copies lacking what packets and xDRs need (no :status, unknown direction, a non-string header value...), by feed, " +
			"the decoder's reason, and whether the feed relayed them as they are (http2, kafka, jsonl files) or skipped them (synthetic, xdr, pcap files)."},
		[]string{"feed", "reason", "action"})
	m.reordered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_reordered_total",
		Help: "Responses a feed with sequencing \"transaction\" moved after their request fetched in the same poll."}, feed)
	m.filterMatched = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_filter_matched_total",
		Help: "Copies (xdr feeds: records) the feed's filter passed."}, feed)
	m.filterDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_filter_dropped_total",
		Help: "Copies (xdr feeds: records) the feed's filter dropped; their offsets are committed all the same."}, feed)
	m.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_records_delivered_total",
		Help: "Transaction records an xdr feed's output confirmed."}, feed)
	m.replayed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_xdr_replayed_copies_total",
		Help: "Copies a re-keyed xdr feed's correlating stage dropped because its re-key stage forwarded them again (a node that took a partition over re-read it from the last commit)."}, feed)
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_xdr_checkpoints_total",
		Help: "Partitions an exactly-once xdr feed took up, by what it found of its checkpoint: restored (its open transactions rebuilt), missing (none yet: a new feed), mismatched (not of the offset committed: records of copies above it may be made again), invalid (a checkpoint record that does not decode)."},
		[]string{"feed", "outcome"})
	m.upstreamStalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "signalbox_feed_xdr_upstream_stalls_total",
		Help: "Times a re-keyed xdr feed held its transaction timeouts because a partition of its re-key stage stopped moving (a node down until the group's session timeout)."}, feed)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.delivered, m.deliveredBytes, m.failures, m.retries, m.flowsEvicted, m.responsesFirst, m.lost,
		m.redelivered, m.lag, m.connected, m.latency, m.invalid, m.undeliverable, m.incomplete, m.reordered, m.tapDrops, m.fencedCommits, m.tapRewinds, m.tapRebalances, m.filterMatched, m.filterDropped, m.records, m.upstreamStalls, m.replayed, m.checkpoints,
		m.capturesActive, m.captureCopies, m.captureDropped} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("director metrics: already registered (one Manager per registry): %w", err)
			}
			return nil, fmt.Errorf("director metrics: %w", err)
		}
	}
	return m, nil
}

// declare makes a running feed's counters exist at 0, so that rate() and
// the dashboards see them before the first event (a first undeliverable
// copy shows as an increase, not as a new series).
func (m *metrics) declare(spec *FeedSpec) {
	for _, v := range []*prometheus.CounterVec{m.delivered, m.deliveredBytes, m.failures, m.retries, m.lost, m.redelivered,
		m.undeliverable, m.tapDrops, m.filterMatched, m.filterDropped} {
		v.WithLabelValues(spec.Name)
	}
	if spec.Type == TypeXDR {
		m.records.WithLabelValues(spec.Name)
		if spec.ExactlyOnce {
			for _, o := range []string{"restored", "missing", "mismatched", "invalid"} {
				m.checkpoints.WithLabelValues(spec.Name, o)
			}
		}
		if spec.XDR != nil && spec.XDR.Rekey {
			m.replayed.WithLabelValues(spec.Name)
			m.upstreamStalls.WithLabelValues(spec.Name)
		}
	} else {
		m.reordered.WithLabelValues(spec.Name)
	}
	if spec.Type == TypeSynthetic {
		m.flowsEvicted.WithLabelValues(spec.Name)
		m.responsesFirst.WithLabelValues(spec.Name)
	}
}

// declareTap makes a shared reader's counters exist at 0.
func (m *metrics) declareTap(key string) {
	for _, v := range []*prometheus.CounterVec{m.fencedCommits, m.tapRewinds, m.tapRebalances} {
		v.WithLabelValues(key)
	}
}

func (m *metrics) forget(feed string) {
	for _, v := range []*prometheus.CounterVec{m.delivered, m.deliveredBytes, m.failures, m.retries, m.lost, m.redelivered,
		m.undeliverable, m.reordered, m.tapDrops, m.filterMatched, m.filterDropped, m.records, m.upstreamStalls, m.replayed, m.flowsEvicted, m.responsesFirst} {
		v.DeleteLabelValues(feed)
	}
	m.incomplete.DeletePartialMatch(prometheus.Labels{"feed": feed})
	m.checkpoints.DeletePartialMatch(prometheus.Labels{"feed": feed})
	m.lag.DeleteLabelValues(feed)
	m.connected.DeleteLabelValues(feed)
	m.latency.DeleteLabelValues(feed)
}
