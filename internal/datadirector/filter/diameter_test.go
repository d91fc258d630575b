package filter

import (
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

func diameterULR() *nfcopy.Copy {
	return &nfcopy.Copy{
		CorrelationID: "dia-00000001-00000002", Direction: nfcopy.RequestIngress, NFType: "DRA", NFFQDN: "dra1.epc",
		Protocol: nfcopy.DiameterProtocol, Raw: make([]byte, 400),
		Diameter: nfcopy.Diameter{
			Flags: 0xc0, Command: 316, AppID: 16777251, HopByHop: 1, EndToEnd: 2,
			OriginHost: "mme1.epc", OriginRealm: "epc.mnc001.mcc001.3gppnetwork.org",
			DestRealm: "hss.epc.mnc001.mcc001.3gppnetwork.org", SessionID: "mme1.epc;1;42",
			UserName: "001010123456789", IMSI: "001010123456789",
		},
	}
}

func diameterCCA() *nfcopy.Copy {
	return &nfcopy.Copy{
		CorrelationID: "dia-00000003-00000004", Direction: nfcopy.ResponseEgress, NFType: "DRA", NFFQDN: "dra1.epc",
		Protocol: nfcopy.DiameterProtocol, Raw: make([]byte, 200),
		Diameter: nfcopy.Diameter{
			Command: 272, AppID: 16777238, HopByHop: 3, EndToEnd: 4, OriginHost: "pcrf1", OriginRealm: "epc",
			DestHost: "pgw1", DestRealm: "epc-gw", SessionID: "pgw1;9", ResultCode: 5030, Experimental: true,
			IMSI: "234150999999999", MSISDN: "447700900123",
		},
	}
}

// diameterFieldTests: an expression true on the ULR copy, one true on the
// CCA copy; notOnResp says onReq must be false on the CCA.
var diameterFieldTests = []struct {
	field, onReq, onResp string
	notOnResp            bool
}{
	{"protocol", `protocol == "diameter"`, `protocol != "sbi"`, false},
	{"diameter.app_id", `diameter.app_id == 16777251`, `diameter.app_id in [16777238, 4]`, true},
	{"diameter.command", `diameter.command == 316`, `diameter.command >= 272 && diameter.command < 273`, true},
	{"diameter.command_name", `diameter.command_name == "ULR"`, `diameter.command_name endsWith "A"`, true},
	{"diameter.result_code", `diameter.result_code == 0`, `diameter.result_code >= 5000`, true},
	{"diameter.origin_host", `diameter.origin_host startsWith "mme"`, `diameter.origin_host == "pcrf1"`, true},
	{"diameter.origin_realm", `diameter.origin_realm contains "mcc001"`, `diameter.origin_realm == "epc"`, true},
	{"diameter.destination_host", `diameter.destination_host == ""`, `diameter.destination_host == "pgw1"`, true},
	{"diameter.destination_realm", `diameter.destination_realm startsWith "hss."`, `diameter.destination_realm == "epc-gw"`, true},
	{"diameter.session_id", `diameter.session_id == "mme1.epc;1;42"`, `diameter.session_id startsWith "pgw1;"`, true},
	{"diameter.user_name", `diameter.user_name == "001010123456789"`, `diameter.user_name == ""`, true},
	{"diameter.hop_by_hop", `diameter.hop_by_hop == 1`, `diameter.hop_by_hop == 3`, true},
	{"diameter.end_to_end", `diameter.end_to_end == 2`, `diameter.end_to_end == 4`, true},
}

func TestDiameterFields(t *testing.T) {
	for _, tc := range diameterFieldTests {
		t.Run(tc.field, func(t *testing.T) {
			for _, c := range []struct {
				src  string
				copy *nfcopy.Copy
				want bool
			}{{tc.onReq, diameterULR(), true}, {tc.onResp, diameterCCA(), true}, {tc.onReq, diameterCCA(), !tc.notOnResp},
				{tc.onReq, reqCopy(), tc.field == "diameter.result_code" || tc.field == "diameter.destination_host"}} {
				f, err := Compile(c.src)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := f.Eval(c.copy); err != nil || got != c.want {
					t.Errorf("%s on %s %s = %v, %v; want %v", c.src, c.copy.Protocol, c.copy.Direction, got, err, c.want)
				}
				if got := oracle(t, c.src, c.copy); got != c.want {
					t.Errorf("oracle: %s on %s %s = %v", c.src, c.copy.Protocol, c.copy.Direction, got)
				}
			}
		})
	}
}

// TestDiameterSubscriber: the subscriber fields read a Diameter copy's
// User-Name and Subscription-Id, not an SBI path or body.
func TestDiameterSubscriber(t *testing.T) {
	for _, tc := range []struct {
		src  string
		copy *nfcopy.Copy
	}{
		{`imsi == "001010123456789" && supi == "imsi-001010123456789" && msisdn == "" && gpsi == ""`, diameterULR()},
		{`imsi == "234150999999999" && msisdn == "447700900123" && gpsi == "msisdn-447700900123" && dnn == ""`, diameterCCA()},
		{`imsi == "234300000014975" && protocol == "sbi" && diameter.app_id == 0`, reqCopy()},
	} {
		f, err := Compile(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Eval(tc.copy); !ok || err != nil {
			t.Errorf("%s: %v %v", tc.src, ok, err)
		}
		if !oracle(t, tc.src, tc.copy) {
			t.Errorf("oracle: %s", tc.src)
		}
	}
}
