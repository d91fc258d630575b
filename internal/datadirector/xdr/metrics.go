package xdr

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// knownServices bounds the service label; anything else is "other".
var knownServices = map[string]bool{
	"namf-comm": true, "namf-evts": true, "namf-mt": true, "namf-loc": true,
	"nsmf-pdusession": true, "nsmf-event-exposure": true, "nsmf-nidd": true,
	"nudm-sdm": true, "nudm-uecm": true, "nudm-ueau": true, "nudm-ee": true, "nudm-pp": true,
	"nudm-niddau": true, "nudm-mt": true, "nudm-ssau": true, "nudm-rsds": true,
	"nausf-auth": true, "nausf-sorprotection": true, "nausf-upuprotection": true,
	"nnrf-nfm": true, "nnrf-disc": true, "nnrf-oauth2": true, "nnrf-bootstrapping": true,
	"nnssf-nsselection": true, "nnssf-nssaiavailability": true,
	"npcf-am-policy-control": true, "npcf-smpolicycontrol": true, "npcf-policyauthorization": true,
	"npcf-bdtpolicycontrol": true, "npcf-eventexposure": true, "npcf-ue-policy-control": true,
	"nudr-dr": true, "nudr-group-id-map": true, "nchf-convergedcharging": true, "nchf-spendinglimitcontrol": true,
	"nbsf-management": true, "nnef-pfdmanagement": true, "nnef-eventexposure": true,
	"nnwdaf-eventssubscription": true, "nnwdaf-analyticsinfo": true, "nsmsf-sms": true,
	"n5g-eir-eic": true, "nlmf-loc": true, "ngmlc-loc": true, "nudsf-dr": true, "nudm-sdm-subscriptions": true,
	"nsepp-telescopic": true, "nscp-callback": true,
}

// knownNFTypes bounds the nf_type label; anything else is "other".
var knownNFTypes = map[string]bool{
	"SCP": true, "NRF": true, "SEPP": true, "PCF": true, "BSF": true, "NON_ORACLE": true,
	"AMF": true, "SMF": true, "UDM": true, "AUSF": true, "UDR": true, "NSSF": true, "NEF": true,
	"CHF": true, "NWDAF": true, "UPF": true, "SMSF": true, "5G_EIR": true, "LMF": true, "GMLC": true,
	"DRA": true, "DEA": true, "DSC": true, "HSS": true, "MME": true, "PCRF": true, "PGW": true, "OCS": true,
}

// ServiceLabel maps a service name to its metric label: itself when it is a
// known 3GPP SBI service or Diameter application, else "other".
func ServiceLabel(s string) string {
	if knownServices[s] || diameterServices[s] {
		return s
	}
	return "other"
}

// NFTypeLabel maps an NF type to its metric label: itself when known, else
// "other".
func NFTypeLabel(t string) string {
	if knownNFTypes[t] {
		return t
	}
	return "other"
}

// labelSet admits the first max distinct values of a label and folds the
// rest into "other", so that what a misbehaving network sends (a new cause
// per error, a producer per pod restart) cannot grow the series without
// bound. The values admitted are those first seen since the process
// started: the busiest values of a steady network.
type labelSet struct {
	mu       sync.Mutex
	max      int
	seen     map[string]struct{}
	overflow prometheus.Counter
}

func newLabelSet(max int, overflow prometheus.Counter) *labelSet {
	return &labelSet{max: max, seen: map[string]struct{}{}, overflow: overflow}
}

func (l *labelSet) label(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) < l.max {
		l.seen[v] = struct{}{}
		return v
	}
	l.overflow.Inc()
	return "other"
}

// Bounds of the KPI labels.
const (
	maxCauses    = 100
	maxProducers = 200
	maxPLMNs     = 200
)

type metrics struct {
	failures                   *prometheus.CounterVec // by nf_type, service, cause
	producers                  *prometheus.CounterVec // by service, producer, outcome
	roaming                    *prometheus.CounterVec // by plmn, service, outcome
	causes, producerSet, plmns *labelSet

	transactions *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	evictions    prometheus.Counter
	duplicates   prometheus.Counter
	late         prometheus.Counter
	handedOver   prometheus.Counter
	dropped      prometheus.Counter
	droppedDir   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_xdr_dropped_copies_total",
		Help: "Copies the correlator could not use, by reason.",
	}, []string{"reason"})
	m := &metrics{
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_xdr_transactions_total",
			Help: "Transaction records emitted, by the NF type that first saw the request, service and status class (timeout for response_timeout).",
		}, []string{"nf_type", "service", "status_class"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "signalbox_xdr_latency_seconds",
			Help:    "Per NF, response egress minus request ingress of the transactions it copied at both points.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"nf_type", "service"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "signalbox_xdr_evictions_total",
			Help: "Transactions emitted before their timeout because the correlator held MaxPending.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "signalbox_xdr_duplicate_copies_total",
			Help: "Copies of an (NF, direction) the transaction already held, dropped.",
		}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "signalbox_xdr_late_copies_total",
			Help: "Copies that arrived after their transaction's record was emitted, dropped.",
		}),
		handedOver: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "signalbox_xdr_handed_over_transactions_total",
			Help: "Pending transactions dropped without a record because their partition went to another node, which reads their copies again and completes them.",
		}),
		dropped:    dropped.WithLabelValues("no_correlation_id"),
		droppedDir: dropped.WithLabelValues("no_direction"),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_xdr_failures_total",
			Help: "Failed transactions (status 400 and above, a Diameter result code 3000 and above, or no response) by the NF type that first saw the request, service and cause: the ProblemDetails cause of the response, http_<status> without one, the Diameter result's name (diameter_<code> when unnamed), timeout without a response. At most 100 causes, then other.",
		}, []string{"nf_type", "service", "cause"}),
		producers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_xdr_producer_transactions_total",
			Help: "Transactions by service, producer NF instance (id, else FQDN; at most 200, then other) and outcome: success (status below 400), failure, timeout.",
		}, []string{"service", "producer", "outcome"}),
		roaming: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "signalbox_xdr_roaming_transactions_total",
			Help: "Transactions a SEPP copied, by roaming partner PLMN (MCC-MNC; at most 200, then other), service and outcome.",
		}, []string{"plmn", "service", "outcome"}),
	}
	overflow := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "signalbox_xdr_label_overflow_total",
		Help: "KPI label values folded into other because the label had its maximum of distinct values (cause, producer, plmn).",
	}, []string{"label"})
	m.causes = newLabelSet(maxCauses, overflow.WithLabelValues("cause"))
	m.producerSet = newLabelSet(maxProducers, overflow.WithLabelValues("producer"))
	m.plmns = newLabelSet(maxPLMNs, overflow.WithLabelValues("plmn"))
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.transactions, m.latency, m.evictions, m.duplicates, m.late, m.handedOver, dropped,
		m.failures, m.producers, m.roaming, overflow} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("xdr: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(r *Record) {
	svc := ServiceLabel(r.Service)
	nf := "other"
	if len(r.HopLatencies) > 0 {
		nf = NFTypeLabel(r.HopLatencies[0].NFType)
	}
	m.transactions.WithLabelValues(nf, svc, r.StatusClass()).Inc()
	outcome := "success"
	switch {
	case r.Result == ResultResponseTimeout:
		outcome = "timeout"
		m.failures.WithLabelValues(nf, svc, "timeout").Inc()
	case r.Protocol == ProtocolDiameter && r.Status >= 3000:
		outcome = "failure"
		m.failures.WithLabelValues(nf, svc, m.causes.label(r.Cause)).Inc()
	case r.Protocol != ProtocolDiameter && r.Status >= 400:
		outcome = "failure"
		cause := r.Cause
		if cause == "" {
			cause = "http_" + strconv.Itoa(r.Status)
		}
		m.failures.WithLabelValues(nf, svc, m.causes.label(cause)).Inc()
	case r.Status == 0:
		outcome = "unknown" // an orphan response without a status
	}
	if r.Producer != "" {
		m.producers.WithLabelValues(svc, m.producerSet.label(r.Producer), outcome).Inc()
	}
	if r.PLMN != "" {
		m.roaming.WithLabelValues(m.plmns.label(r.PLMN), svc, outcome).Inc()
	}
	for i := range r.HopLatencies {
		if d := r.HopLatencies[i].TotalNs; d >= 0 {
			m.latency.WithLabelValues(NFTypeLabel(r.HopLatencies[i].NFType), svc).Observe(float64(d) / 1e9)
		}
	}
}
