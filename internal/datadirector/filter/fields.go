package filter

import (
	"strconv"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// FieldDoc describes one field a filter expression may use.
type FieldDoc struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // string, int or map[string]string
	Description string `json:"description"`
}

type kind uint8

const (
	kString kind = iota
	kInt
	kMap
)

type fieldID uint8

const (
	fNFType fieldID = iota
	fNFFQDN
	fNFInstanceID
	fPod
	fDirection
	fMethod
	fPath
	fService
	fAPIVersion
	fResource
	fStatus
	fContentType
	fCorrelationID
	fProducerFQDN
	fProducerID
	fConsumerFQDN
	fConsumerID
	fSourceIP
	fDestIP
	fSourcePort
	fDestPort
	fUserAgent
	fTimestamp
	fSize
	fSUPI
	fIMSI
	fSUCI
	fGPSI
	fMSISDN
	fPEI
	fIMEI
	fDNN
	fSNSSAI
	fHeader
	fProtocol
	fDiaAppID
	fDiaCommand
	fDiaCommandName
	fDiaResultCode
	fDiaOriginHost
	fDiaOriginRealm
	fDiaDestHost
	fDiaDestRealm
	fDiaSessionID
	fDiaUserName
	fDiaHopByHop
	fDiaEndToEnd
	nFields
)

type field struct {
	name string
	kind kind
	ids  xdr.IdentityKind // identities the field needs scanned for
	doc  string
}

var fields = [nFields]field{
	fNFType:        {"nf_type", kString, 0, "NF type that made the copy (feed-source nf-type): SCP, NRF, SEPP, PCF, BSF, ..."},
	fNFFQDN:        {"nf_fqdn", kString, 0, "FQDN of the NF that made the copy"},
	fNFInstanceID:  {"nf_instance_id", kString, 0, "NF instance id of the NF that made the copy"},
	fPod:           {"pod", kString, 0, "pod instance id of the NF that made the copy"},
	fDirection:     {"direction", kString, 0, "trigger point: REQUEST_INGRESS, REQUEST_EGRESS, RESPONSE_INGRESS or RESPONSE_EGRESS"},
	fMethod:        {"method", kString, 0, "HTTP method (:method); \"\" for responses"},
	fPath:          {"path", kString, 0, "request :path with its query; \"\" for responses"},
	fService:       {"service", kString, 0, "SBI service from :path, e.g. nudm-ueau for /nudm-ueau/v1/...; \"\" for responses"},
	fAPIVersion:    {"api_version", kString, 0, "API version from :path, e.g. v1"},
	fResource:      {"resource", kString, 0, "the :path after the API version, without leading slash or query"},
	fStatus:        {"status", kInt, 0, "HTTP :status of a response; 0 for request copies (a request copy does not know its response)"},
	fContentType:   {"content_type", kString, 0, "content-type header"},
	fCorrelationID: {"correlation_id", kString, 0, "correlation-id metadata shared by the copies of one transaction"},
	fProducerFQDN:  {"producer_fqdn", kString, 0, "producer-fqdn metadata"},
	fProducerID:    {"producer_id", kString, 0, "producer-id metadata (NF instance id of the producer)"},
	fConsumerFQDN:  {"consumer_fqdn", kString, 0, "consumer-fqdn metadata"},
	fConsumerID:    {"consumer_id", kString, 0, "consumer-id metadata (NF instance id of the consumer)"},
	fSourceIP:      {"source_ip", kString, 0, "source-ip metadata"},
	fDestIP:        {"destination_ip", kString, 0, "destination-ip metadata"},
	fSourcePort:    {"source_port", kInt, 0, "source-port metadata; 0 when absent"},
	fDestPort:      {"destination_port", kInt, 0, "destination-port metadata; 0 when absent"},
	fUserAgent:     {"user_agent", kString, 0, "user-agent header"},
	fTimestamp:     {"timestamp", kInt, 0, "copy timestamp, nanoseconds since the epoch"},
	fSize:          {"size", kInt, 0, "size of the whole copy record in bytes"},
	fSUPI:          {"supi", kString, xdr.IDSUPI, "SUPI found in the path or body, with prefix: imsi-<digits>"},
	fIMSI:          {"imsi", kString, xdr.IDSUPI, "the digits of the SUPI"},
	fSUCI:          {"suci", kString, xdr.IDSUCI, "SUCI found in the path or body: suci-..."},
	fGPSI:          {"gpsi", kString, xdr.IDGPSI, "GPSI found in the path or body, with prefix: msisdn-<digits>"},
	fMSISDN:        {"msisdn", kString, xdr.IDGPSI, "the digits of the GPSI"},
	fPEI:           {"pei", kString, xdr.IDPEI, "PEI found in the path or body, with prefix: imei-<digits> or imeisv-<digits>"},
	fIMEI:          {"imei", kString, xdr.IDPEI, "the digits of the PEI (IMEI or IMEISV)"},
	fDNN:           {"dnn", kString, xdr.IDDNN, "DNN: the first \"dnn\" string in the body, else the dnn query parameter"},
	fSNSSAI:        {"snssai", kString, xdr.IDSNSSAI, "first S-NSSAI in the body as sst or sst-sd, e.g. 1-000001"},
	fHeader:        {"header", kMap, 0, "headers by lower-case name, first value: header[\"3gpp-sbi-target-apiroot\"]; \"\" when absent"},
	fProtocol:      {"protocol", kString, 0, "what the copy holds: sbi (HTTP/2) or diameter"},

	// Diameter copies' fields, from the message (0 or "" for SBI copies).
	// The subscriber fields above (imsi, supi, msisdn, gpsi) also hold for
	// Diameter copies: from User-Name or Subscription-Id.
	fDiaAppID:       {"diameter.app_id", kInt, 0, "Diameter application id, e.g. 16777251 (S6a), 16777238 (Gx), 16777236 (Rx)"},
	fDiaCommand:     {"diameter.command", kInt, 0, "Diameter command code, e.g. 316 (Update-Location), 272 (Credit-Control)"},
	fDiaCommandName: {"diameter.command_name", kString, 0, "Diameter command abbreviation with R or A, e.g. ULR, CCA; \"\" when the dictionary does not know it"},
	fDiaResultCode:  {"diameter.result_code", kInt, 0, "an answer's Result-Code, else its Experimental-Result-Code; 0 for requests"},
	fDiaOriginHost:  {"diameter.origin_host", kString, 0, "Origin-Host"},
	fDiaOriginRealm: {"diameter.origin_realm", kString, 0, "Origin-Realm"},
	fDiaDestHost:    {"diameter.destination_host", kString, 0, "Destination-Host"},
	fDiaDestRealm:   {"diameter.destination_realm", kString, 0, "Destination-Realm"},
	fDiaSessionID:   {"diameter.session_id", kString, 0, "Session-Id"},
	fDiaUserName:    {"diameter.user_name", kString, 0, "User-Name (the IMSI in S6a and SWx)"},
	fDiaHopByHop:    {"diameter.hop_by_hop", kInt, 0, "the header's hop-by-hop identifier"},
	fDiaEndToEnd:    {"diameter.end_to_end", kInt, 0, "the header's end-to-end identifier"},
}

var fieldByName = func() map[string]fieldID {
	m := make(map[string]fieldID, nFields)
	for i := range fields {
		m[fields[i].name] = fieldID(i)
	}
	return m
}()

// Fields lists the fields of copy filter expressions, for docs, the console
// and validation messages.
func Fields() []FieldDoc {
	out := make([]FieldDoc, 0, nFields)
	for _, f := range fields {
		t := "string"
		switch f.kind {
		case kInt:
			t = "int"
		case kMap:
			t = "map[string]string"
		}
		out = append(out, FieldDoc{Name: f.name, Type: t, Description: f.doc})
	}
	return out
}

// extraction is the per-copy memo of values several fields share.
type extraction struct {
	c          *nfcopy.Copy
	pathDone   bool
	path       string
	svc, ver   string
	res        string
	idsDone    bool
	ids        xdr.Identities
	idWant     xdr.IdentityKind
	statusDone bool
	status     int
}

func (x *extraction) reset(c *nfcopy.Copy, want xdr.IdentityKind) {
	x.c, x.pathDone, x.idsDone, x.statusDone, x.idWant = c, false, false, false, want
	x.path, x.svc, x.ver, x.res = "", "", "", ""
}

func (x *extraction) splitPath() {
	if !x.pathDone {
		x.pathDone = true
		x.path = x.c.Header(":path")
		x.svc, x.ver, x.res = xdr.SplitPath(x.path)
	}
}

func (x *extraction) identities() *xdr.Identities {
	if !x.idsDone {
		x.idsDone = true
		x.ids.Reset()
		x.ids.Find(x.idWant, x.c.Header(":path"), x.c.Body)
	}
	return &x.ids
}

// afterDash strips an identity's type prefix: imsi-123 → 123.
func afterDash(s string) string {
	if i := strings.IndexByte(s, '-'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// diameterStr is the value of a subscriber field of a Diameter copy.
func diameterStr(d *nfcopy.Diameter, f fieldID) string {
	switch f {
	case fSUPI:
		if d.IMSI != "" {
			return "imsi-" + d.IMSI
		}
	case fIMSI:
		return d.IMSI
	case fGPSI:
		if d.MSISDN != "" {
			return "msisdn-" + d.MSISDN
		}
	case fMSISDN:
		return d.MSISDN
	}
	return ""
}

// str is the value of a string field.
func (x *extraction) str(f fieldID) string {
	c := x.c
	if fields[f].ids != 0 && c.Protocol == nfcopy.DiameterProtocol {
		return diameterStr(&c.Diameter, f)
	}
	switch f {
	case fNFType:
		return c.NFType
	case fNFFQDN:
		return c.NFFQDN
	case fNFInstanceID:
		return c.NFInstanceID
	case fPod:
		return c.PodInstanceID
	case fDirection:
		return c.Direction.String()
	case fMethod:
		return c.Header(":method")
	case fPath:
		x.splitPath()
		return x.path
	case fService:
		x.splitPath()
		return x.svc
	case fAPIVersion:
		x.splitPath()
		return x.ver
	case fResource:
		x.splitPath()
		return x.res
	case fContentType:
		return c.Header("content-type")
	case fCorrelationID:
		return c.CorrelationID
	case fProducerFQDN:
		return c.ProducerFQDN
	case fProducerID:
		return c.ProducerID
	case fConsumerFQDN:
		return c.ConsumerFQDN
	case fConsumerID:
		return c.ConsumerID
	case fSourceIP:
		return c.SourceIP
	case fDestIP:
		return c.DestIP
	case fUserAgent:
		return c.Header("user-agent")
	case fSUPI:
		return x.identities().SUPI
	case fIMSI:
		return afterDash(x.identities().SUPI)
	case fSUCI:
		return x.identities().SUCI
	case fGPSI:
		return x.identities().GPSI
	case fMSISDN:
		return afterDash(x.identities().GPSI)
	case fPEI:
		return x.identities().PEI
	case fIMEI:
		return afterDash(x.identities().PEI)
	case fDNN:
		return x.identities().DNN
	case fSNSSAI:
		return x.identities().SNSSAI
	case fProtocol:
		return c.Protocol.String()
	case fDiaCommandName:
		return c.Diameter.CommandName()
	case fDiaOriginHost:
		return c.Diameter.OriginHost
	case fDiaOriginRealm:
		return c.Diameter.OriginRealm
	case fDiaDestHost:
		return c.Diameter.DestHost
	case fDiaDestRealm:
		return c.Diameter.DestRealm
	case fDiaSessionID:
		return c.Diameter.SessionID
	case fDiaUserName:
		return c.Diameter.UserName
	}
	return ""
}

// num is the value of an int field.
func (x *extraction) num(f fieldID) int {
	c := x.c
	switch f {
	case fStatus:
		if !x.statusDone {
			x.statusDone = true
			x.status = 0
			if !c.Direction.IsRequest() {
				x.status, _ = strconv.Atoi(c.Header(":status"))
			}
		}
		return x.status
	case fSourcePort:
		return int(c.SourcePort)
	case fDestPort:
		return int(c.DestPort)
	case fTimestamp:
		return int(c.Timestamp)
	case fSize:
		return len(c.Raw)
	case fDiaAppID:
		return int(c.Diameter.AppID)
	case fDiaCommand:
		return int(c.Diameter.Command)
	case fDiaResultCode:
		return int(c.Diameter.ResultCode)
	case fDiaHopByHop:
		return int(c.Diameter.HopByHop)
	case fDiaEndToEnd:
		return int(c.Diameter.EndToEnd)
	}
	return 0
}

// headerMap builds the whole header map, for expressions that index it with
// something other than a constant.
func headerMap(c *nfcopy.Copy, m map[string]string) {
	for _, h := range c.Headers {
		name := h.Name
		for i := 0; i < len(name); i++ {
			if name[i] >= 'A' && name[i] <= 'Z' {
				name = strings.ToLower(name)
				break
			}
		}
		if _, dup := m[name]; dup {
			continue
		}
		v := ""
		if len(h.Values) > 0 {
			v = h.Values[0]
		}
		m[name] = v
	}
}
