package nfsim

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// DiameterGen makes the copies a DRA makes of the Diameter transactions it
// relays: for each, the request as it arrived (REQUEST_INGRESS) and the
// answer as it left (RESPONSE_EGRESS), one hop, so the two share their
// hop-by-hop and end-to-end ids. The mix is S6a Update-Location and
// Authentication-Information between MMEs and an HSS, and Gx Credit-Control
// between PGWs and a PCRF; ErrRate of answers fail (5001 user unknown
// as an Experimental-Result on S6a, 5030 on Gx). Messages are encoded by
// go-diameter. Not safe for concurrent use.
type DiameterGen struct {
	NFType  string // "DRA" unless set
	NFFQDN  string
	ErrRate float64 // 0.03 unless set below 0
	r       *rand.Rand
	hbh     uint32
	e2e     uint32
	session uint64
}

// Diameter application ids and command codes DiameterGen uses.
const (
	AppS6a       = 16777251
	AppGx        = 16777238
	CmdULR       = 316
	CmdAIR       = 318
	CmdCCR       = 272
	diameterPort = 3868
)

// NewDiameterGen returns a generator whose ids and subscribers follow seed.
func NewDiameterGen(seed uint64) *DiameterGen {
	r := rand.New(rand.NewPCG(seed, 0xd1a))
	return &DiameterGen{NFType: "DRA", NFFQDN: "dra1.epc.mnc001.mcc001.3gppnetwork.org", ErrRate: 0.03,
		r: r, hbh: r.Uint32(), e2e: uint32(seed<<20) | r.Uint32()&0xfffff}
}

// DiameterTxn is one generated transaction: its two copy records and what
// the messages say.
type DiameterTxn struct {
	Request, Answer []byte // copy records (JSON)
	AppID, Command  uint32
	HopByHop        uint32
	EndToEnd        uint32
	ResultCode      uint32
	IMSI            string
}

// Next makes the next transaction: the request copied at ts, the answer at
// ts+latencyNs.
func (g *DiameterGen) Next(ts, latencyNs int64) (DiameterTxn, error) {
	g.hbh++
	g.e2e++
	g.session++
	t := DiameterTxn{HopByHop: g.hbh, EndToEnd: g.e2e, ResultCode: diam.Success}
	t.IMSI = "00101" + fmt.Sprintf("%010d", g.r.Uint64N(1e10))
	fail := g.ErrRate > 0 && g.r.Float64() < g.ErrRate
	client, server := "mme1.epc.mnc001.mcc001.3gppnetwork.org", "hss1.epc.mnc001.mcc001.3gppnetwork.org"
	// Four clients, each on one connection to the server, as Diameter
	// peers keep theirs.
	peer := 1 + g.r.IntN(4)
	clientIP, serverIP := "10.30.0."+strconv.Itoa(peer), "10.30.1.1"
	realm := "epc.mnc001.mcc001.3gppnetwork.org"
	var reqAVPs []*diam.AVP
	switch n := g.r.IntN(10); {
	case n < 4:
		t.AppID, t.Command = AppS6a, CmdULR
		reqAVPs = []*diam.AVP{
			diam.NewAVP(avp.ULRFlags, avp.Mbit|avp.Vbit, 10415, datatype.Unsigned32(34)),
			diam.NewAVP(avp.VisitedPLMNID, avp.Mbit|avp.Vbit, 10415, datatype.OctetString("\x00\xf1\x10")),
			diam.NewAVP(avp.RATType, avp.Mbit|avp.Vbit, 10415, datatype.Enumerated(1004)),
		}
	case n < 7:
		t.AppID, t.Command = AppS6a, CmdAIR
		reqAVPs = []*diam.AVP{
			diam.NewAVP(avp.VisitedPLMNID, avp.Mbit|avp.Vbit, 10415, datatype.OctetString("\x00\xf1\x10")),
		}
	default:
		t.AppID, t.Command = AppGx, CmdCCR
		client, server = "pgw1.epc.mnc001.mcc001.3gppnetwork.org", "pcrf1.epc.mnc001.mcc001.3gppnetwork.org"
		clientIP, serverIP = "10.31.0."+strconv.Itoa(peer), "10.31.1.1"
		msisdn := "4477009" + fmt.Sprintf("%05d", g.r.IntN(1e5))
		reqAVPs = []*diam.AVP{
			diam.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(AppGx)),
			diam.NewAVP(avp.CCRequestType, avp.Mbit, 0, datatype.Enumerated(1)),
			diam.NewAVP(avp.CCRequestNumber, avp.Mbit, 0, datatype.Unsigned32(0)),
			subscriptionID(0, msisdn), subscriptionID(1, t.IMSI),
		}
	}
	sessionID := client + ";" + strconv.FormatUint(g.session, 10)
	session := diam.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(sessionID))
	req := []*diam.AVP{session,
		diam.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(client)),
		diam.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(realm)),
		diam.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity(realm))}
	if t.AppID == AppS6a {
		req = append(req, diam.NewAVP(avp.AuthSessionState, avp.Mbit, 0, datatype.Enumerated(1)),
			diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String(t.IMSI)))
	} else {
		req = append(req, diam.NewAVP(avp.DestinationHost, avp.Mbit, 0, datatype.DiameterIdentity(server)))
	}
	req = append(req, reqAVPs...)
	ans := []*diam.AVP{session,
		diam.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(server)),
		diam.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(realm))}
	switch {
	case fail && t.AppID == AppS6a:
		t.ResultCode = 5001
		ans = append(ans, diam.NewAVP(avp.ExperimentalResult, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(10415)),
			diam.NewAVP(avp.ExperimentalResultCode, avp.Mbit, 0, datatype.Unsigned32(5001)),
		}}))
	case fail:
		t.ResultCode = 5030
		ans = append(ans, diam.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(5030)))
	default:
		ans = append(ans, diam.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(diam.Success)))
	}

	reqMsg, err := diameterMessage(t.Command, diam.RequestFlag|diam.ProxiableFlag, t.AppID, t.HopByHop, t.EndToEnd, req)
	if err != nil {
		return t, err
	}
	ansMsg, err := diameterMessage(t.Command, diam.ProxiableFlag, t.AppID, t.HopByHop, t.EndToEnd, ans)
	if err != nil {
		return t, err
	}
	port := uint16(40000 + peer)
	c := nfcopy.Copy{Version: "1.0.0", Timestamp: ts, Direction: nfcopy.RequestIngress, NFType: g.NFType, NFFQDN: g.NFFQDN,
		SourceIP: clientIP, DestIP: serverIP, SourcePort: port, DestPort: diameterPort, Protocol: nfcopy.DiameterProtocol, Body: reqMsg}
	t.Request = nfcopy.AppendJSON(nil, &c)
	c.Timestamp, c.Direction, c.Body = ts+latencyNs, nfcopy.ResponseEgress, ansMsg
	c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = serverIP, clientIP, diameterPort, port
	t.Answer = nfcopy.AppendJSON(nil, &c)
	return t, nil
}

func subscriptionID(typ int32, data string) *diam.AVP {
	return diam.NewAVP(avp.SubscriptionID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.SubscriptionIDType, avp.Mbit, 0, datatype.Enumerated(typ)),
		diam.NewAVP(avp.SubscriptionIDData, avp.Mbit, 0, datatype.UTF8String(data)),
	}})
}

func diameterMessage(cmd uint32, flags uint8, app, hbh, e2e uint32, avps []*diam.AVP) ([]byte, error) {
	m := diam.NewMessage(cmd, flags, app, hbh, e2e, dict.Default)
	for _, a := range avps {
		m.AddAVP(a)
	}
	return m.Serialize()
}
