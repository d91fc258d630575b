package xdr

import (
	"strconv"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// A Diameter transaction is a request and its answer, joined like SBI copies
// by correlation-id (which a Diameter copy without one takes from its
// hop-by-hop and end-to-end ids: see nfcopy). Its record has Protocol
// "diameter", Service the application's interface name (s6a, gx, ...),
// Status the latest answer's result code and Diameter what the request and
// answer say.

// ProtocolDiameter is Record.Protocol of a Diameter transaction.
const ProtocolDiameter = "diameter"

// DiameterRecord is what a Diameter transaction's request and answer said.
type DiameterRecord struct {
	AppID       uint32 `json:"app_id"`
	Command     uint32 `json:"command"`
	CommandName string `json:"command_name,omitempty"` // the request's, e.g. ULR
	// ResultCode is the latest answer's Result-Code, else its
	// Experimental-Result-Code (ExperimentalResult set); 0 without an answer.
	ResultCode         uint32 `json:"result_code,omitempty"`
	ExperimentalResult bool   `json:"experimental_result,omitempty"`
	OriginHost         string `json:"origin_host,omitempty"`  // the request's
	OriginRealm        string `json:"origin_realm,omitempty"` // the request's
	// DestinationHost is the request's Destination-Host, else the host
	// that answered (the answer's Origin-Host).
	DestinationHost  string `json:"destination_host,omitempty"`
	DestinationRealm string `json:"destination_realm,omitempty"`
	SessionID        string `json:"session_id,omitempty"`
	UserName         string `json:"user_name,omitempty"`
	HopByHop         uint32 `json:"hop_by_hop"`
	EndToEnd         uint32 `json:"end_to_end"`
}

// diameterApps names the applications whose interface names are the service
// label; others are app-<id>, folded into other by ServiceLabel.
var diameterApps = map[uint32]string{
	0: "diameter-base", 3: "diameter-accounting", 4: "gy",
	16777216: "cx", 16777217: "sh", 16777236: "rx", 16777238: "gx", 16777251: "s6a", 16777252: "s13",
	16777255: "slg", 16777265: "swx", 16777266: "sta", 16777267: "s9", 16777272: "s6b", 16777291: "slh",
	16777302: "sy", 16777308: "s6t", 16777310: "s6m", 16777312: "sgd", 16777345: "s6c",
}

// diameterServices are diameterApps' names: service labels like the SBI
// services of knownServices.
var diameterServices = func() map[string]bool {
	m := make(map[string]bool, len(diameterApps))
	for _, name := range diameterApps {
		m[name] = true
	}
	return m
}()

// DiameterApplication is the service name of a Diameter application.
func DiameterApplication(id uint32) string {
	if s, ok := diameterApps[id]; ok {
		return s
	}
	return "app-" + strconv.FormatUint(uint64(id), 10)
}

// diameterResults names the result codes a failure is counted under (RFC
// 6733 §7.1, RFC 4006, TS 29.272, TS 29.214, TS 29.212); others count as
// diameter_<code>.
var diameterResults = map[uint32]string{
	3001: "DIAMETER_COMMAND_UNSUPPORTED", 3002: "DIAMETER_UNABLE_TO_DELIVER", 3003: "DIAMETER_REALM_NOT_SERVED",
	3004: "DIAMETER_TOO_BUSY", 3005: "DIAMETER_LOOP_DETECTED", 3006: "DIAMETER_REDIRECT_INDICATION",
	3007: "DIAMETER_APPLICATION_UNSUPPORTED", 3008: "DIAMETER_INVALID_HDR_BITS", 3009: "DIAMETER_INVALID_AVP_BITS",
	3010: "DIAMETER_UNKNOWN_PEER",
	4001: "DIAMETER_AUTHENTICATION_REJECTED", 4002: "DIAMETER_OUT_OF_SPACE", 4003: "ELECTION_LOST",
	4010: "DIAMETER_END_USER_SERVICE_DENIED", 4012: "DIAMETER_CREDIT_LIMIT_REACHED",
	4181: "DIAMETER_AUTHENTICATION_DATA_UNAVAILABLE",
	5001: "DIAMETER_ERROR_USER_UNKNOWN", 5002: "DIAMETER_UNKNOWN_SESSION_ID", 5003: "DIAMETER_AUTHORIZATION_REJECTED",
	5004: "DIAMETER_ERROR_ROAMING_NOT_ALLOWED", 5005: "DIAMETER_MISSING_AVP", 5006: "DIAMETER_RESOURCES_EXCEEDED",
	5007: "DIAMETER_CONTRADICTING_AVPS", 5008: "DIAMETER_AVP_NOT_ALLOWED", 5009: "DIAMETER_AVP_OCCURS_TOO_MANY_TIMES",
	5010: "DIAMETER_NO_COMMON_APPLICATION", 5011: "DIAMETER_UNSUPPORTED_VERSION", 5012: "DIAMETER_UNABLE_TO_COMPLY",
	5014: "DIAMETER_INVALID_AVP_LENGTH", 5030: "DIAMETER_USER_UNKNOWN",
	5420: "DIAMETER_ERROR_UNKNOWN_EPS_SUBSCRIPTION", 5421: "DIAMETER_ERROR_RAT_NOT_ALLOWED",
	5422: "DIAMETER_ERROR_EQUIPMENT_UNKNOWN",
}

// diameterCause is the failure cause of a result code: its name, else
// diameter_<code>; "" for success (below 3000).
func diameterCause(code uint32) string {
	if code < 3000 {
		return ""
	}
	if s, ok := diameterResults[code]; ok {
		return s
	}
	return "diameter_" + strconv.FormatUint(uint64(code), 10)
}

// diameterClass is the status class of a Diameter record: 1xxx..5xxx.
func diameterClass(code int) string {
	switch code / 1000 {
	case 1:
		return "1xxx"
	case 2:
		return "2xxx"
	case 3:
		return "3xxx"
	case 4:
		return "4xxx"
	case 5:
		return "5xxx"
	}
	return "other"
}

// addDiameter keeps what a Diameter copy says: the first request's header
// and hosts, the latest answer's result. It returns the copy's status (its
// result code; 0 for a request).
func (t *txn) addDiameter(c *nfcopy.Copy, s *shard, latest bool) int {
	d := &c.Diameter
	r := t.dia
	if r == nil {
		r = &DiameterRecord{AppID: d.AppID, Command: d.Command, HopByHop: d.HopByHop, EndToEnd: d.EndToEnd}
		t.dia = r
	}
	if c.Direction.IsRequest() {
		if t.reqs == 0 {
			r.AppID, r.Command, r.HopByHop, r.EndToEnd = d.AppID, d.Command, d.HopByHop, d.EndToEnd
			r.CommandName = s.str(d.CommandName())
			r.OriginHost, r.OriginRealm = s.str(d.OriginHost), s.str(d.OriginRealm)
			if d.DestHost != "" {
				r.DestinationHost = s.str(d.DestHost)
			}
			r.DestinationRealm = s.str(d.DestRealm)
			r.SessionID, r.UserName = strings.Clone(d.SessionID), strings.Clone(d.UserName)
		}
		t.diameterIDs(d)
		return 0
	}
	if r.DestinationHost == "" {
		r.DestinationHost = s.str(d.OriginHost)
	}
	if t.producerFQDN == "" {
		t.producerFQDN = s.str(d.OriginHost)
	}
	if latest {
		r.ResultCode, r.ExperimentalResult = d.ResultCode, d.Experimental
		t.cause = s.str(diameterCause(d.ResultCode))
	}
	t.diameterIDs(d)
	return int(d.ResultCode)
}

func (t *txn) diameterIDs(d *nfcopy.Diameter) {
	if t.ids.SUPI == "" && d.IMSI != "" {
		t.ids.SUPI = "imsi-" + d.IMSI
	}
	if t.ids.GPSI == "" && d.MSISDN != "" {
		t.ids.GPSI = "msisdn-" + d.MSISDN
	}
}
