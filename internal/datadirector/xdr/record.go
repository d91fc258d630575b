// Package xdr correlates NF message copies into transaction records (xDR):
// the request and response copies that every network function on a
// transaction's path made, joined by correlation-id into one record with the
// hops, per-NF latencies, result and subscriber identities.
//
// A Correlator is safe for concurrent use: pending transactions are sharded by
// correlation-id, each shard under its own lock. See Correlator for when a
// transaction counts as complete.
package xdr

// Result says how a transaction record ended.
const (
	// ResultComplete: every NF that copied the request also copied the
	// matching response (see Correlator).
	ResultComplete = "complete"
	// ResultPartial: responses arrived but some NF's copies are missing at the
	// timeout (a lost copy, or an NF whose response copy never came).
	ResultPartial = "partial"
	// ResultResponseTimeout: request copies but no response copy within the
	// timeout.
	ResultResponseTimeout = "response_timeout"
	// ResultOrphanResponse: response copies whose request copies never came
	// within the timeout.
	ResultOrphanResponse = "orphan_response"
)

// Record is one correlated transaction. Timestamps are the copies' own
// timestamps, nanoseconds since the epoch.
type Record struct {
	CorrelationID string `json:"correlation_id"`
	// Protocol is "diameter" for a Diameter transaction, absent for SBI.
	Protocol string `json:"protocol,omitempty"`
	// Service is from :path, e.g. nudm-ueau ("" without a request copy);
	// a Diameter transaction's is its application: s6a, gx, rx, ... or
	// app-<id>.
	Service    string `json:"service"`
	APIVersion string `json:"api_version"` // e.g. v1
	Method     string `json:"method"`
	Path       string `json:"path"`
	// Status is the latest response copy's :status, a Diameter answer's
	// result code; 0 without one.
	Status int `json:"status"`
	// Diameter is what a Diameter transaction's request and answer said.
	Diameter *DiameterRecord `json:"diameter,omitempty"`
	// Cause is the 3GPP ProblemDetails cause (TS 29.571) of the latest
	// response when it failed (status 400 and above), e.g. USER_NOT_FOUND.
	Cause string `json:"cause,omitempty"`
	// Producer is the NF instance that served the request (its NF
	// instance id, else its FQDN, from the copies' metadata).
	Producer string `json:"producer,omitempty"`
	// PLMN is, for a transaction a SEPP copied, the roaming partner's
	// PLMN as MCC-MNC, from the 3GPP FQDN (mncXXX.mccYYY.3gppnetwork.org)
	// of the producer, else the consumer.
	PLMN   string `json:"plmn,omitempty"`
	SUPI   string `json:"supi,omitempty"`
	SUCI   string `json:"suci,omitempty"`
	GPSI   string `json:"gpsi,omitempty"`
	PEI    string `json:"pei,omitempty"`
	DNN    string `json:"dnn,omitempty"`
	SNSSAI string `json:"snssai,omitempty"`
	// Hops are the distinct copies in timestamp order.
	Hops []Hop `json:"hops"`
	// HopLatencies has one entry per NF that copied the transaction, in the
	// order the NFs first saw the request.
	HopLatencies []HopLatency `json:"hop_latencies"`
	RequestSize  int          `json:"request_size"`  // body bytes of the first request copy
	ResponseSize int          `json:"response_size"` // body bytes of the latest response copy
	Start        int64        `json:"start"`         // earliest copy
	End          int64        `json:"end"`           // latest copy
	// LatencyNs is the latest response copy minus the earliest request copy:
	// the transaction's time as seen by the outermost NF. 0 unless both exist.
	LatencyNs  int64  `json:"latency_ns"`
	Result     string `json:"result"`
	Copies     int    `json:"copies"`     // distinct copies joined
	Duplicates int    `json:"duplicates"` // further copies of an (NF, direction, hop-by-hop id) already held, dropped
	Retries    int    `json:"retries"`    // hops at a trigger point already held with another hop-by-hop id (retries, reroutes)
	Evicted    bool   `json:"evicted,omitempty"`
}

// Hop is one copy of the transaction.
type Hop struct {
	NFType       string `json:"nf_type"`
	NFFQDN       string `json:"nf_fqdn"`
	NFInstanceID string `json:"nf_instance_id,omitempty"`
	Direction    string `json:"direction"`
	Timestamp    int64  `json:"timestamp"`
	Status       int    `json:"status,omitempty"` // responses only
	HopByHopID   string `json:"hop_by_hop_id,omitempty"`
}

// HopLatency is one NF's share of the transaction. A value is -1 when the NF
// did not copy both of the trigger points it is measured between.
type HopLatency struct {
	NFType       string `json:"nf_type"`
	NFFQDN       string `json:"nf_fqdn"`
	NFInstanceID string `json:"nf_instance_id,omitempty"`
	// TotalNs = RESPONSE_EGRESS − REQUEST_INGRESS: how long the NF held the
	// transaction, downstream time included.
	TotalNs int64 `json:"total_ns"`
	// DownstreamNs = RESPONSE_INGRESS − REQUEST_EGRESS: the time spent beyond
	// this NF (next hop and producer).
	DownstreamNs int64 `json:"downstream_ns"`
	// ProcessingNs = TotalNs − DownstreamNs: the NF's own time (SCP-like NFs
	// with all four copy points only).
	ProcessingNs int64 `json:"processing_ns"`
}

// StatusClass is the bounded label for a record's outcome: 1xx..5xx from the
// status (1xxx..5xxx from a Diameter result code), "timeout" for
// response_timeout, "other" for anything else.
func (r *Record) StatusClass() string {
	if r.Result == ResultResponseTimeout {
		return "timeout"
	}
	if r.Protocol == ProtocolDiameter {
		return diameterClass(r.Status)
	}
	switch r.Status / 100 {
	case 1:
		return "1xx"
	case 2:
		return "2xx"
	case 3:
		return "3xx"
	case 4:
		return "4xx"
	case 5:
		return "5xx"
	}
	return "other"
}

// NFTypes lists the distinct NF types of the record's hops, in hop order.
func (r *Record) NFTypes() []string {
	out := make([]string, 0, 2)
outer:
	for _, h := range r.Hops {
		for _, t := range out {
			if t == h.NFType {
				continue outer
			}
		}
		out = append(out, h.NFType)
	}
	return out
}
