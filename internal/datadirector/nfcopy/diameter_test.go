package nfcopy

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"
)

// Diameter application ids and command codes of the tests.
const (
	appS6a = 16777251
	appGx  = 16777238
	cmdULR = 316
	cmdCCR = 272
)

func diamMsg(t testing.TB, cmd uint32, request bool, app, hbh, e2e uint32, avps ...*diam.AVP) []byte {
	t.Helper()
	flags := uint8(0)
	if request {
		flags = diam.RequestFlag | diam.ProxiableFlag
	}
	m := diam.NewMessage(cmd, flags, app, hbh, e2e, dict.Default)
	for _, a := range avps {
		m.AddAVP(a)
	}
	b, err := m.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ident(code uint32, s string) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit, 0, datatype.DiameterIdentity(s))
}

func ulr(t testing.TB) []byte {
	return diamMsg(t, cmdULR, true, appS6a, 0x11223344, 0xaabbccdd,
		diam.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String("mme1.epc;1;42")),
		ident(avp.OriginHost, "mme1.epc.mnc001.mcc001.3gppnetwork.org"),
		ident(avp.OriginRealm, "epc.mnc001.mcc001.3gppnetwork.org"),
		ident(avp.DestinationRealm, "epc.mnc001.mcc001.3gppnetwork.org"),
		diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("001010123456789")),
		// A vendor AVP no dictionary knows, and a 3GPP one (ULR-Flags).
		diam.NewAVP(99999, avp.Vbit, 424242, datatype.OctetString("opaque")),
		diam.NewAVP(avp.ULRFlags, avp.Mbit|avp.Vbit, 10415, datatype.Unsigned32(34)),
	)
}

func ula(t testing.TB) []byte {
	return diamMsg(t, cmdULR, false, appS6a, 0x11223344, 0xaabbccdd,
		diam.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String("mme1.epc;1;42")),
		ident(avp.OriginHost, "hss1.epc.mnc001.mcc001.3gppnetwork.org"),
		ident(avp.OriginRealm, "epc.mnc001.mcc001.3gppnetwork.org"),
		diam.NewAVP(avp.ExperimentalResult, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(10415)),
			diam.NewAVP(avp.ExperimentalResultCode, avp.Mbit, 0, datatype.Unsigned32(5001)),
		}}),
	)
}

func diamRecord(dir, field, msg string) []byte {
	return []byte(`{"version":"1.0.0","metadata-list":{"timestamp":"1700000000000000000","message-direction":"` + dir +
		`","feed-source":{"nf-type":"DRA","nf-fqdn":"dra1.epc"},"source-ip":"10.0.0.1","destination-ip":"10.0.0.2"},"` +
		field + `":"` + msg + `"}`)
}

func TestDecodeDiameter(t *testing.T) {
	req, ans := ulr(t), ula(t)
	var c Copy
	for _, tc := range []struct {
		name, field, msg string
	}{
		{"base64", "diameter-message", base64.StdEncoding.EncodeToString(req)},
		{"base64 unpadded", "diameter-message", base64.RawStdEncoding.EncodeToString(req)},
		{"hex", "diameter-message-hex", strings.ToUpper(hex.EncodeToString(req))},
	} {
		if err := Decode(diamRecord("REQUEST_INGRESS", tc.field, tc.msg), &c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := c.Diameter
		if c.Protocol != DiameterProtocol || string(c.Body) != string(req) {
			t.Fatalf("%s: protocol %v, body %d bytes", tc.name, c.Protocol, len(c.Body))
		}
		if d.AppID != appS6a || d.Command != cmdULR || !d.IsRequest() || d.HopByHop != 0x11223344 || d.EndToEnd != 0xaabbccdd {
			t.Fatalf("%s: header %+v", tc.name, d)
		}
		if d.OriginHost != "mme1.epc.mnc001.mcc001.3gppnetwork.org" || d.DestRealm != "epc.mnc001.mcc001.3gppnetwork.org" ||
			d.DestHost != "" || d.SessionID != "mme1.epc;1;42" || d.UserName != "001010123456789" || d.IMSI != "001010123456789" {
			t.Fatalf("%s: AVPs %+v", tc.name, d)
		}
		if d.CommandName() != "ULR" || d.ResultCode != 0 {
			t.Fatalf("%s: %q result %d", tc.name, d.CommandName(), d.ResultCode)
		}
		if c.CorrelationID != "dia-11223344-aabbccdd" || c.HopByHopID != "11223344" {
			t.Fatalf("%s: ids %q %q", tc.name, c.CorrelationID, c.HopByHopID)
		}
	}

	if err := Decode(diamRecord("RESPONSE_EGRESS", "diameter-message", base64.StdEncoding.EncodeToString(ans)), &c); err != nil {
		t.Fatal(err)
	}
	if d := c.Diameter; d.IsRequest() || d.ResultCode != 5001 || !d.Experimental || d.CommandName() != "ULA" || c.CorrelationID != "dia-11223344-aabbccdd" {
		t.Fatalf("answer: %+v %q", d, c.CorrelationID)
	}
	// The copy survives its buffer, and round-trips.
	k := c.Clone()
	var back Copy
	if err := Decode(AppendJSON(nil, k), &back); err != nil {
		t.Fatal(err)
	}
	if back.Diameter != c.Diameter || string(back.Body) != string(ans) || back.CorrelationID != c.CorrelationID {
		t.Fatalf("round trip: %+v", back.Diameter)
	}
}

func TestDecodeDiameterSubscriptionID(t *testing.T) {
	sub := func(typ uint32, data string) *diam.AVP {
		return diam.NewAVP(avp.SubscriptionID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
			diam.NewAVP(avp.SubscriptionIDType, avp.Mbit, 0, datatype.Enumerated(typ)),
			diam.NewAVP(avp.SubscriptionIDData, avp.Mbit, 0, datatype.UTF8String(data)),
		}})
	}
	ccr := diamMsg(t, cmdCCR, true, appGx, 1, 2,
		diam.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String("pgw1;9")),
		ident(avp.OriginHost, "pgw1"), ident(avp.OriginRealm, "epc"), ident(avp.DestinationHost, "pcrf1"),
		sub(0, "447700900123"), sub(1, "234150999999999"))
	var c Copy
	if err := Decode(diamRecord("REQUEST_EGRESS", "diameter-message", base64.StdEncoding.EncodeToString(ccr)), &c); err != nil {
		t.Fatal(err)
	}
	if d := c.Diameter; d.IMSI != "234150999999999" || d.MSISDN != "447700900123" || d.DestHost != "pcrf1" || d.CommandName() != "CCR" {
		t.Fatalf("%+v %q", d, d.CommandName())
	}
	// An application whose dictionary does not know Subscription-Id as
	// grouped (Rx) still yields it; so does a command none knows.
	rx := diamMsg(t, 265, true, 16777236, 3, 4, ident(avp.OriginHost, "pcscf1"), sub(1, "234150888888888"))
	if err := Decode(diamRecord("REQUEST_INGRESS", "diameter-message", base64.StdEncoding.EncodeToString(rx)), &c); err != nil {
		t.Fatal(err)
	}
	if d := c.Diameter; d.IMSI != "234150888888888" || d.OriginHost != "pcscf1" || d.AppID != 16777236 {
		t.Fatalf("Rx: %+v", d)
	}
	odd := diamMsg(t, 8388999, true, 4294967290, 5, 6, ident(avp.OriginHost, "x"))
	if err := Decode(diamRecord("REQUEST_INGRESS", "diameter-message", base64.StdEncoding.EncodeToString(odd)), &c); err != nil {
		t.Fatal(err)
	}
	if d := c.Diameter; d.Command != 8388999 || d.CommandName() != "" || d.OriginHost != "x" {
		t.Fatalf("unknown command: %+v", d)
	}
}

func TestDecodeDiameterMalformed(t *testing.T) {
	good := ulr(t)
	b64 := base64.StdEncoding.EncodeToString
	setLen := func(b []byte, n int) []byte {
		b = append([]byte(nil), b...)
		b[1], b[2], b[3] = byte(n>>16), byte(n>>8), byte(n)
		return b
	}
	// The first AVP's length claims more than the message has.
	past := append([]byte(nil), good...)
	past[diam.HeaderLength+5], past[diam.HeaderLength+6] = 0x0f, 0xff
	// A vendor AVP (V bit) of 8 bytes: no room for its vendor id.
	short := append(append([]byte(nil), good[:diam.HeaderLength]...), 0, 0, 0, 1, avp.Vbit, 0, 0, 8)
	short = setLen(short, len(short))
	v2 := append([]byte(nil), good...)
	v2[0] = 2
	for _, tc := range []struct {
		name, dir, field, msg, reason string
	}{
		{"short header", "REQUEST_INGRESS", "diameter-message", b64(good[:12]), "bad_diameter_header"},
		{"length not the message's", "REQUEST_INGRESS", "diameter-message", b64(setLen(good, len(good)+4)), "bad_diameter_header"},
		{"version 2", "REQUEST_INGRESS", "diameter-message", b64(v2), "bad_diameter_header"},
		{"AVP past the end", "REQUEST_INGRESS", "diameter-message", b64(past), "bad_avp"},
		{"vendor AVP too short", "REQUEST_INGRESS", "diameter-message", b64(short), "bad_avp"},
		{"not base64", "REQUEST_INGRESS", "diameter-message", "%%%%", "bad_encoding"},
		{"not hex", "REQUEST_INGRESS", "diameter-message-hex", "0g", "bad_encoding"},
		{"answer copied as a request", "RESPONSE_INGRESS", "diameter-message", b64(good), "bad_direction"},
	} {
		var c Copy
		err := Decode(diamRecord(tc.dir, tc.field, tc.msg), &c)
		var de *DecodeError
		if !errors.As(err, &de) || !de.Incomplete || de.Reason != tc.reason {
			t.Errorf("%s: %v, want incomplete %s", tc.name, err, tc.reason)
			continue
		}
		// Still a copy: relaying feeds deliver it as it came.
		if c.NFType != "DRA" || c.Protocol != DiameterProtocol || len(c.Raw) == 0 {
			t.Errorf("%s: copy %+v", tc.name, c)
		}
	}
}

// FuzzDecodeDiameter feeds arbitrary messages: Decode never panics, and what
// it accepts has the header the bytes say.
func FuzzDecodeDiameter(f *testing.F) {
	f.Add(ulr(f))
	f.Add(ula(f))
	f.Add([]byte{1, 0, 0, 20, 0x80, 0, 1, 0x3c, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2})
	var c Copy
	f.Fuzz(func(t *testing.T, msg []byte) {
		rec := diamRecord("REQUEST_INGRESS", "diameter-message", base64.StdEncoding.EncodeToString(msg))
		if err := Decode(rec, &c); err != nil {
			return
		}
		if len(msg) < diam.HeaderLength || c.Diameter.AppID != uint32(msg[8])<<24|uint32(msg[9])<<16|uint32(msg[10])<<8|uint32(msg[11]) {
			t.Fatalf("accepted %x as %+v", msg, c.Diameter)
		}
	})
}

func BenchmarkDecodeDiameter(b *testing.B) {
	rec := diamRecord("REQUEST_INGRESS", "diameter-message", base64.StdEncoding.EncodeToString(ulr(b)))
	var c Copy
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if err := Decode(rec, &c); err != nil {
			b.Fatal(err)
		}
	}
}
