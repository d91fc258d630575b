package nfsim

import (
	"math/rand/v2"
	"strconv"
	"unsafe"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// service is one SBI operation the simulator emits.
type service struct {
	name               string
	consumer, producer string // NF types on either side
	method             string
	okStatus           int
	contentType        string
	path               func(g *gen, b []byte) []byte
	reqBody            func(g *gen, b []byte) []byte // nil: no body
	respBody           func(g *gen, b []byte) []byte // nil: no body
}

const plmnNet = "5G:mnc030.mcc234.3gppnetwork.org"

var services = []service{
	{name: "nudm-ueau", consumer: "AUSF", producer: "UDM", method: "POST", okStatus: 200, contentType: "application/json",
		path: func(g *gen, b []byte) []byte {
			b = append(b, "/nudm-ueau/v1/"...)
			b = g.supi(b)
			return append(b, "/security-information/generate-auth-data"...)
		},
		reqBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"servingNetworkName":"`+plmnNet+`","ausfInstanceId":"`...)
			b = g.uuid(b)
			return append(b, `"}`...)
		},
		respBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"authType":"5G_AKA","authenticationVector":{"avType":"5G_HE_AKA","rand":"`...)
			b = g.hex(b, 32)
			b = append(b, `","xresStar":"`...)
			b = g.hex(b, 32)
			b = append(b, `","autn":"`...)
			b = g.hex(b, 32)
			b = append(b, `","kausf":"`...)
			b = g.hex(b, 64)
			b = append(b, `"},"supi":"`...)
			b = g.supi(b)
			return append(b, `"}`...)
		}},
	{name: "nudm-sdm", consumer: "AMF", producer: "UDM", method: "GET", okStatus: 200, contentType: "application/json",
		path: func(g *gen, b []byte) []byte {
			b = append(b, "/nudm-sdm/v2/"...)
			b = g.supi(b)
			return append(b, "/am-data?plmn-id=%7B%22mcc%22%3A%22234%22%2C%22mnc%22%3A%2230%22%7D"...)
		},
		respBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"gpsis":["`...)
			b = g.gpsi(b)
			return append(b, `"],"subscribedUeAmbr":{"uplink":"1 Gbps","downlink":"2 Gbps"},"nssai":{"defaultSingleNssais":[{"sst":1},{"sst":1,"sd":"000001"}]},"ratRestrictions":[],"rfspIndex":1,"subsRegTimer":3600}`...)
		}},
	{name: "nnrf-disc", consumer: "SMF", producer: "NRF", method: "GET", okStatus: 200, contentType: "application/json",
		path: func(g *gen, b []byte) []byte {
			b = append(b, "/nnrf-disc/v1/nf-instances?target-nf-type="...)
			b = append(b, []string{"UPF", "UDM", "PCF", "AUSF", "CHF"}[g.r.IntN(5)]...)
			return append(b, "&requester-nf-type=SMF&service-names=nudm-sdm"...)
		},
		respBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"validityPeriod":3600,"nfInstances":[{"nfInstanceId":"`...)
			b = g.uuid(b)
			b = append(b, `","nfType":"UDM","nfStatus":"REGISTERED","plmnList":[{"mcc":"234","mnc":"30"}],"ipv4Addresses":["`...)
			b = g.ip(b)
			return append(b, `"],"priority":1,"capacity":100}]}`...)
		}},
	{name: "nnrf-nfm-put", consumer: "AMF", producer: "NRF", method: "PUT", okStatus: 201, contentType: "application/json",
		path: func(g *gen, b []byte) []byte {
			b = append(b, "/nnrf-nfm/v1/nf-instances/"...)
			return g.uuid(b)
		},
		reqBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"nfInstanceId":"`...)
			b = g.uuid(b)
			b = append(b, `","nfType":"AMF","nfStatus":"REGISTERED","heartBeatTimer":30,"plmnList":[{"mcc":"234","mnc":"30"}],"sNssais":[{"sst":1}],"ipv4Addresses":["`...)
			b = g.ip(b)
			return append(b, `"],"amfInfo":{"amfSetId":"001","amfRegionId":"01","guamiList":[{"plmnId":{"mcc":"234","mnc":"30"},"amfId":"010041"}]}}`...)
		},
		respBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"nfInstanceId":"`...)
			b = g.uuid(b)
			return append(b, `","nfType":"AMF","nfStatus":"REGISTERED","heartBeatTimer":30}`...)
		}},
	{name: "nnrf-nfm-patch", consumer: "SMF", producer: "NRF", method: "PATCH", okStatus: 204, contentType: "application/json-patch+json",
		path: func(g *gen, b []byte) []byte {
			b = append(b, "/nnrf-nfm/v1/nf-instances/"...)
			return g.uuid(b)
		},
		reqBody: func(g *gen, b []byte) []byte {
			return append(b, `[{"op":"replace","path":"/nfStatus","value":"REGISTERED"},{"op":"replace","path":"/load","value":`+"42"+`}]`...)
		}},
	{name: "nausf-auth", consumer: "AMF", producer: "AUSF", method: "POST", okStatus: 201, contentType: "application/json",
		path: func(g *gen, b []byte) []byte { return append(b, "/nausf-auth/v1/ue-authentications"...) },
		reqBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"supiOrSuci":"suci-0-234-30-0-0-0-`...)
			b = g.digits(b, 10)
			return append(b, `","servingNetworkName":"`+plmnNet+`"}`...)
		},
		respBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"authType":"5G_AKA","5gAuthData":{"rand":"`...)
			b = g.hex(b, 32)
			b = append(b, `","hxresStar":"`...)
			b = g.hex(b, 32)
			b = append(b, `","autn":"`...)
			b = g.hex(b, 32)
			b = append(b, `"},"_links":{"5g-aka":{"href":"http://ausf1.5gc.mnc030.mcc234.3gppnetwork.org/nausf-auth/v1/ue-authentications/`...)
			b = g.uuid(b)
			return append(b, `/5g-aka-confirmation"}}}`...)
		}},
	{name: "npcf-smpolicycontrol", consumer: "SMF", producer: "PCF", method: "POST", okStatus: 201, contentType: "application/json",
		path: func(g *gen, b []byte) []byte { return append(b, "/npcf-smpolicycontrol/v1/sm-policies"...) },
		reqBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"supi":"`...)
			b = g.supi(b)
			b = append(b, `","gpsi":"`...)
			b = g.gpsi(b)
			b = append(b, `","pei":"`...)
			b = g.pei(b)
			b = append(b, `","pduSessionId":`...)
			b = strconv.AppendInt(b, int64(1+g.r.IntN(15)), 10)
			b = append(b, `,"dnn":"internet","sliceInfo":{"sst":1},"ipv4Address":"`...)
			b = g.ip(b)
			return append(b, `","ratType":"NR","servingNetwork":{"mcc":"234","mnc":"30"}}`...)
		},
		respBody: func(g *gen, b []byte) []byte {
			return append(b, `{"sessRules":{"SessRule1":{"sessRuleId":"SessRule1","authSessAmbr":{"uplink":"500 Mbps","downlink":"1 Gbps"},"authDefQos":{"5qi":9,"arp":{"priorityLevel":8,"preemptCap":"NOT_PREEMPT","preemptVuln":"PREEMPTABLE"}}}},"online":true}`...)
		}},
	{name: "nsmf-pdusession", consumer: "AMF", producer: "SMF", method: "POST", okStatus: 201, contentType: "application/json",
		path: func(g *gen, b []byte) []byte { return append(b, "/nsmf-pdusession/v1/sm-contexts"...) },
		reqBody: func(g *gen, b []byte) []byte {
			b = append(b, `{"supi":"`...)
			b = g.supi(b)
			b = append(b, `","pei":"`...)
			b = g.pei(b)
			b = append(b, `","gpsi":"`...)
			b = g.gpsi(b)
			b = append(b, `","pduSessionId":`...)
			b = strconv.AppendInt(b, int64(1+g.r.IntN(15)), 10)
			b = append(b, `,"dnn":"internet","sNssai":{"sst":1},"servingNfId":"`...)
			b = g.uuid(b)
			return append(b, `","anType":"3GPP_ACCESS","ratType":"NR","requestType":"INITIAL_REQUEST"}`...)
		},
		respBody: func(g *gen, b []byte) []byte {
			return append(b, `{"pduSessionId":5,"sNssai":{"sst":1},"upCnxState":"ACTIVATING","hoState":"NONE"}`...)
		}},
}

// servicesFor lists the services an NF type sees: an NRF only its own
// services, a PCF its own; SCP and SEPP route everything.
func servicesFor(nfType string) []*service {
	var out []*service
	for i := range services {
		s := &services[i]
		switch nfType {
		case "SCP", "SEPP":
			out = append(out, s)
		default:
			if s.producer == nfType {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 { // an NF type we know nothing of: it routes everything
		for i := range services {
			out = append(out, &services[i])
		}
	}
	return out
}

var errorCauses = []struct {
	status int
	cause  string
}{
	{404, "USER_NOT_FOUND"}, {403, "AUTHENTICATION_REJECTED"}, {400, "MANDATORY_IE_INCORRECT"},
	{500, "SYSTEM_FAILURE"}, {503, "NF_CONGESTION"}, {429, "NF_CONGESTION_RISK"},
}

// gen generates the transactions of one NF type; not safe for concurrent use.
type gen struct {
	nfType string
	runID  string
	r      *rand.Rand
	svcs   []*service
	nfFQDN string
	nfID   string
	pod    string
	nfIP   string
	seq    int64
	stream uint32
	hop    int64
	copies []nfcopy.Copy // the current transaction's copies, in send order
	next   int
	// The NF's peers: the consumers calling it and the producers it calls,
	// each with its HTTP/2 connections to this NF (client ports).
	consumers, producers []peer
	dirs                 []nfcopy.Direction
	scratch              [5][]byte // per-transaction string storage, reused
	// The transaction's other strings and one-value header lists, in
	// storage reused transaction after transaction (a copy is sent before
	// the next transaction starts), so that nfsim allocates nothing per
	// copy on the harness core it shares with the probes.
	arena   []byte
	vals    []string
	errRate float64
}

func newGen(nfType, runID string, seed uint64) *gen {
	g := &gen{nfType: nfType, runID: runID, r: rand.New(rand.NewPCG(seed, 0x5b0c)), svcs: servicesFor(nfType), errRate: 0.03}
	switch nfType {
	case "SCP":
		g.dirs = []nfcopy.Direction{nfcopy.RequestIngress, nfcopy.RequestEgress, nfcopy.ResponseIngress, nfcopy.ResponseEgress}
	default:
		// An NF acting as producer (NRF, PCF) or a gateway (SEPP) copies at its
		// ingress: the request arriving and the response leaving.
		g.dirs = []nfcopy.Direction{nfcopy.RequestIngress, nfcopy.ResponseEgress}
	}
	lower := []byte(nfType)
	for i, c := range lower {
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 32
		}
	}
	g.nfFQDN = string(lower) + "1.5gc.mnc030.mcc234.3gppnetwork.org"
	g.nfID = string(g.uuid(nil))
	g.pod = string(lower) + "1-worker-" + string(g.hex(nil, 10))
	g.nfIP = string(g.ip(nil))
	g.consumers, g.producers = g.peers(peerInstances), g.peers(peerInstances)
	g.copies = make([]nfcopy.Copy, len(g.dirs))
	g.next = len(g.dirs)
	return g
}

func (g *gen) digits(b []byte, n int) []byte {
	for range n {
		b = append(b, byte('0'+g.r.IntN(10)))
	}
	return b
}

func (g *gen) hex(b []byte, n int) []byte {
	const h = "0123456789abcdef"
	for range n {
		b = append(b, h[g.r.IntN(16)])
	}
	return b
}

func (g *gen) uuid(b []byte) []byte {
	b = g.hex(b, 8)
	b = append(b, '-')
	b = g.hex(b, 4)
	b = append(b, "-4"...)
	b = g.hex(b, 3)
	b = append(b, "-a"...)
	b = g.hex(b, 3)
	b = append(b, '-')
	return g.hex(b, 12)
}

func (g *gen) supi(b []byte) []byte { return g.digits(append(b, "imsi-23430"...), 10) }
func (g *gen) gpsi(b []byte) []byte { return g.digits(append(b, "msisdn-4477009"...), 5) }
func (g *gen) pei(b []byte) []byte  { return g.digits(append(b, "imeisv-35"...), 14) }
func (g *gen) ip(b []byte) []byte {
	b = append(b, "10."...)
	b = strconv.AppendInt(b, int64(g.r.IntN(256)), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(g.r.IntN(256)), 10)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(1+g.r.IntN(254)), 10)
}

// peer is an NF instance on the other side of this NF's SBI connections.
// SBI clients keep HTTP/2 connections open and multiplex transactions on
// them as streams (TS 29.500 §5.2.6), so a transaction rides one of a few
// long-lived connections rather than opening its own: the synthetic stream
// then has the few long flows of a real capture, not one connection set-up
// per transaction.
type peer struct {
	id, ip string
	ports  [peerConns]uint16 // client ports of its connections with this NF
}

const (
	peerInstances = 32 // consumer and producer instances per NF type
	peerConns     = 2  // HTTP/2 connections per peer and direction
)

func (g *gen) peers(n int) []peer {
	ps := make([]peer, n)
	for i := range ps {
		ps[i].id, ps[i].ip = string(g.uuid(nil)), string(g.ip(nil))
		for j := range ps[i].ports {
			ps[i].ports[j] = 40000 + uint16(g.r.IntN(20000))
		}
	}
	return ps
}

// str is b as a string, valid until b is next written: the generator's
// per-transaction storage, reused once the transaction's copies are sent.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// join is the concatenation of parts, in the transaction's arena. A full
// arena is replaced, not grown in place: strings made earlier in the
// transaction keep the old one.
func (g *gen) join(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if cap(g.arena)-len(g.arena) < n {
		g.arena = make([]byte, 0, max(2*cap(g.arena), n, 1024))
	}
	start := len(g.arena)
	for _, p := range parts {
		g.arena = append(g.arena, p...)
	}
	return str(g.arena[start:])
}

// uint is v in decimal, in the transaction's arena.
func (g *gen) uint(v uint64) string {
	var b [20]byte
	return g.join(unsafe.String(&b[0], len(strconv.AppendUint(b[:0], v, 10))))
}

// one is a header value list holding v, in the transaction's storage (the
// same rule as join).
func (g *gen) one(v string) []string {
	if len(g.vals) == cap(g.vals) {
		g.vals = make([]string, 0, max(2*cap(g.vals), 64))
	}
	g.vals = append(g.vals, v)
	n := len(g.vals)
	return g.vals[n-1 : n : n]
}

// nextCopy returns the next copy to send, starting a new transaction when the
// current one is exhausted. The copy is valid until the next call.
func (g *gen) nextCopy() *nfcopy.Copy {
	if g.next >= len(g.copies) {
		g.newTransaction()
	}
	c := &g.copies[g.next]
	g.next++
	g.seq++
	return c
}

func (g *gen) newTransaction() {
	g.next = 0
	s := g.svcs[g.r.IntN(len(g.svcs))]
	for i := range g.scratch {
		g.scratch[i] = g.scratch[i][:0]
	}
	clear(g.vals)
	g.arena, g.vals = g.arena[:0], g.vals[:0]
	g.scratch[0] = g.uuid(g.scratch[0])
	g.scratch[4] = g.supi(g.scratch[4])
	g.scratch[1] = s.path(g, g.scratch[1])
	corr, supi, path := str(g.scratch[0]), str(g.scratch[4]), str(g.scratch[1])
	cons := &g.consumers[g.r.IntN(len(g.consumers))]
	prod := &g.producers[g.r.IntN(len(g.producers))]
	consumerID, consumerIP := cons.id, cons.ip
	producerID, producerIP := prod.id, prod.ip
	var reqBody, respBody []byte
	if s.reqBody != nil {
		reqBody = s.reqBody(g, g.scratch[2])
		g.scratch[2] = reqBody
	}
	status := s.okStatus
	if g.r.Float64() < g.errRate {
		e := errorCauses[g.r.IntN(len(errorCauses))]
		status = e.status
		b := append(g.scratch[3], `{"title":"`...)
		b = append(b, e.cause...)
		b = append(b, `","status":`...)
		b = strconv.AppendInt(b, int64(e.status), 10)
		b = append(b, `,"cause":"`...)
		b = append(b, e.cause...)
		respBody = append(b, `"}`...)
		g.scratch[3] = respBody
	} else if s.respBody != nil {
		respBody = s.respBody(g, g.scratch[3])
		g.scratch[3] = respBody
	}
	g.hop++
	hop := g.uint(uint64(g.hop))
	consumerFQDN := lowerFQDN(s.consumer)
	producerFQDN := lowerFQDN(s.producer)
	statusStr := g.uint(uint64(status))
	// One HTTP/2 exchange per leg: the consumer-facing leg (ingress request,
	// egress response) and the producer-facing leg (egress request, ingress
	// response). A leg's request and response share its client port and
	// stream id, and the response flows back from server to client.
	g.stream += 2
	inStream := g.uint(uint64(g.stream | 1))
	g.stream += 2
	outStream := g.uint(uint64(g.stream | 1))
	userAgent := g.join(s.consumer, "-", consumerID[:8])
	apiRoot := g.join("http://", producerFQDN, ":8080")
	server := g.join(s.producer, "-", producerID[:8])
	inPort, outPort := cons.ports[g.r.IntN(peerConns)], prod.ports[g.r.IntN(peerConns)]
	for i, dir := range g.dirs {
		c := &g.copies[i]
		hdrs, body := c.Headers[:0], c.Body[:0]
		*c = nfcopy.Copy{
			Version: "1.0.0", CorrelationID: corr, HopByHopID: hop,
			ConsumerID: consumerID, ConsumerFQDN: consumerFQDN, ProducerID: producerID, ProducerFQDN: producerFQDN,
			Direction: dir, NFType: g.nfType, NFFQDN: g.nfFQDN, NFInstanceID: g.nfID, PodInstanceID: g.pod,
		}
		// Ingress requests and egress responses face the consumer; egress
		// requests and ingress responses face the producer.
		authority, stream := g.nfFQDN, inStream
		clientIP, serverIP, clientPort := consumerIP, g.nfIP, inPort
		if dir == nfcopy.RequestEgress || dir == nfcopy.ResponseIngress {
			authority, stream = producerFQDN, outStream
			clientIP, serverIP, clientPort = g.nfIP, producerIP, outPort
		}
		if dir.IsRequest() {
			c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = clientIP, serverIP, clientPort, 8080
		} else {
			c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = serverIP, clientIP, 8080, clientPort
		}
		if dir.IsRequest() {
			hdrs = append(hdrs,
				nfcopy.Header{Name: ":method", Values: g.one(s.method)},
				nfcopy.Header{Name: ":scheme", Values: g.one("http")},
				nfcopy.Header{Name: ":authority", Values: g.one(authority)},
				nfcopy.Header{Name: ":path", Values: g.one(path)},
				nfcopy.Header{Name: "user-agent", Values: g.one(userAgent)},
				nfcopy.Header{Name: "3gpp-sbi-target-apiroot", Values: g.one(apiRoot)},
				nfcopy.Header{Name: "3gpp-sbi-correlation-info", Values: g.one(supi)},
			)
			if reqBody != nil {
				hdrs = append(hdrs, nfcopy.Header{Name: "content-type", Values: g.one(s.contentType)})
				body = append(body, reqBody...)
			} else {
				hdrs = append(hdrs, nfcopy.Header{Name: "accept", Values: g.one("application/json")})
			}
		} else {
			hdrs = append(hdrs, nfcopy.Header{Name: ":status", Values: g.one(statusStr)})
			if respBody != nil {
				ct := "application/json"
				if status >= 400 {
					ct = "application/problem+json"
				}
				hdrs = append(hdrs, nfcopy.Header{Name: "content-type", Values: g.one(ct)})
				body = append(body, respBody...)
			}
			hdrs = append(hdrs, nfcopy.Header{Name: "server", Values: g.one(server)})
		}
		hdrs = append(hdrs, nfcopy.Header{Name: "x-http2-stream-id", Values: g.one(stream)})
		c.Headers, c.Body = hdrs, body
	}
}

func lowerFQDN(nf string) string {
	switch nf {
	case "AUSF":
		return "ausf1.5gc.mnc030.mcc234.3gppnetwork.org"
	case "UDM":
		return "udm1.5gc.mnc030.mcc234.3gppnetwork.org"
	case "AMF":
		return "amf1.5gc.mnc030.mcc234.3gppnetwork.org"
	case "SMF":
		return "smf1.5gc.mnc030.mcc234.3gppnetwork.org"
	case "NRF":
		return "nrf1.5gc.mnc030.mcc234.3gppnetwork.org"
	case "PCF":
		return "pcf1.5gc.mnc030.mcc234.3gppnetwork.org"
	}
	return "nf1.5gc.mnc030.mcc234.3gppnetwork.org"
}

// appendRecord encodes c with the x-signalbox-seq header and the send
// timestamp, padded to exactly size bytes when it is shorter. It reports
// whether the record came out larger than size.
func (g *gen) appendRecord(dst []byte, c *nfcopy.Copy, ts int64, size int) ([]byte, bool) {
	c.Timestamp = ts
	base := len(dst)
	n := len(c.Headers)
	seq := g.join(g.runID, "/", g.nfType, "/", g.uint(uint64(g.seq)))
	c.Headers = append(c.Headers, nfcopy.Header{Name: "x-signalbox-seq", Values: g.one(seq)})
	padInBody := len(c.Body) > 1 && c.Body[0] == '{'
	if padInBody {
		// Keep the body valid JSON: the pad is its last field.
		bl := len(c.Body)
		c.Body = append(c.Body[:bl-1], `,"x-signalbox-pad":""}`...)
		dst = nfcopy.AppendJSON(dst, c)
		c.Body = append(c.Body[:bl-1], '}')
	} else {
		c.Headers = append(c.Headers, nfcopy.Header{Name: "x-signalbox-pad", Values: g.one("")})
		dst = nfcopy.AppendJSON(dst, c)
	}
	c.Headers = c.Headers[:n]
	short := size - (len(dst) - base)
	if short < 0 {
		return dst, true
	}
	if short == 0 {
		return dst, false
	}
	// Insertion point: inside the empty pad value, found from the end.
	var at int
	if padInBody {
		at = len(dst) - len(`\"}"}`) // ...\"x-signalbox-pad\":\"|\"}"}
	} else {
		at = len(dst) - len(`"]},"5g-sbi-message":""}`)
		if len(c.Body) > 0 { // a non-JSON body after the header list
			at = lastIndex(dst[base:], `"x-signalbox-pad":["`) + base + len(`"x-signalbox-pad":["`)
		}
	}
	dst = append(dst, make([]byte, short)...)
	copy(dst[at+short:], dst[at:len(dst)-short])
	for p := dst[at : at+short]; len(p) > 0; { // memmove, not a byte loop
		p = p[copy(p, padding):]
	}
	return dst, false
}

// padding is what records are padded with.
const padding = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

func lastIndex(b []byte, s string) int {
	for i := len(b) - len(s); i >= 0; i-- {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
