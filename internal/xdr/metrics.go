package xdr

import (
	"fmt"

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
}

// ServiceLabel maps a service name to its metric label: itself when it is a
// known 3GPP SBI service, else "other".
func ServiceLabel(s string) string {
	if knownServices[s] {
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

type metrics struct {
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
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.transactions, m.latency, m.evictions, m.duplicates, m.late, m.handedOver, dropped} {
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
	for i := range r.HopLatencies {
		if d := r.HopLatencies[i].TotalNs; d >= 0 {
			m.latency.WithLabelValues(NFTypeLabel(r.HopLatencies[i].NFType), svc).Observe(float64(d) / 1e9)
		}
	}
}
