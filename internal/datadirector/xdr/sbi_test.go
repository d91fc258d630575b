package xdr

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplitPath(t *testing.T) {
	tests := []struct{ in, svc, ver, res string }{
		{"/nudm-ueau/v1/suci-0-234-30-0-0-0-9000014975/security-information/generate-auth-data", "nudm-ueau", "v1", "suci-0-234-30-0-0-0-9000014975/security-information/generate-auth-data"},
		{"/nnrf-disc/v1/nf-instances?target-nf-type=UDM", "nnrf-disc", "v1", "nf-instances"},
		{"/nausf-auth/v1/ue-authentications", "nausf-auth", "v1", "ue-authentications"},
		{"/nudm-sdm/v2/", "nudm-sdm", "v2", ""},
		{"/nudm-sdm/v2", "nudm-sdm", "v2", ""},
		{"/nudm-sdm", "nudm-sdm", "", ""},
		{"/oauth2/token", "oauth2", "", "token"},
		{"/x/vx/y", "x", "", "vx/y"},
		{"", "", "", ""},
		{"/", "", "", ""},
		{"relative/v1/x", "", "", ""},
		{"?a=b", "", "", ""},
	}
	for _, tc := range tests {
		s, v, r := SplitPath(tc.in)
		if s != tc.svc || v != tc.ver || r != tc.res {
			t.Errorf("SplitPath(%q) = %q %q %q, want %q %q %q", tc.in, s, v, r, tc.svc, tc.ver, tc.res)
		}
	}
}

func TestFindIdentities(t *testing.T) {
	tests := []struct {
		name string
		path string
		body string
		want Identities
	}{
		{"supi in path", "/nudm-sdm/v2/imsi-234300000014975/am-data", "", Identities{SUPI: "imsi-234300000014975"}},
		{"path before body", "/nudm-sdm/v2/imsi-111110000000001/am-data", `{"supi":"imsi-222220000000002"}`, Identities{SUPI: "imsi-111110000000001"}},
		{"suci", "/nudm-ueau/v1/suci-0-234-30-0-0-0-9000014975/security-information/generate-auth-data", "", Identities{SUCI: "suci-0-234-30-0-0-0-9000014975"}},
		{"body ids", "/npcf-smpolicycontrol/v1/sm-policies",
			`{"supi":"imsi-234301234567890","gpsi":"msisdn-447700900123","pei":"imeisv-3512345678901234","dnn":"internet","sliceInfo":{"sd":"0000ff","sst":2}}`,
			Identities{SUPI: "imsi-234301234567890", GPSI: "msisdn-447700900123", PEI: "imeisv-3512345678901234", DNN: "internet", SNSSAI: "2-0000ff"}},
		{"imei", "", `{"pei":"imei-490154203237518"}`, Identities{PEI: "imei-490154203237518"}},
		{"sst without sd", "", `{"sNssai":{"sst":1},"dnn" : "ims"}`, Identities{SNSSAI: "1", DNN: "ims"}},
		{"dnn in query", "/nudm-sdm/v2/imsi-234300000000001/sm-data?dnn=internet&single-nssai=x", "", Identities{SUPI: "imsi-234300000000001", DNN: "internet"}},
		{"not a token start", "/x/abcimsi-234300000000001", `{"k":"ximsi-123456"}`, Identities{}},
		{"too few digits", "", `{"supi":"imsi-1234","gpsi":"msisdn-12"}`, Identities{}},
		{"too many digits", "", `{"supi":"imsi-1234567890123456"}`, Identities{}},
		{"second candidate", "", `{"a":"imsi-12","b":"imsi-234300000000009"}`, Identities{SUPI: "imsi-234300000000009"}},
		{"escaped dnn ignored", "", `{"dnn":"a\"b"}`, Identities{}},
		{"truncated", "", `{"sst":`, Identities{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ids Identities
			got := ids.Find(IDAll, tc.path, []byte(tc.body))
			if fmt.Sprint(ids.SUPI, ids.SUCI, ids.GPSI, ids.PEI, ids.DNN, ids.SNSSAI) !=
				fmt.Sprint(tc.want.SUPI, tc.want.SUCI, tc.want.GPSI, tc.want.PEI, tc.want.DNN, tc.want.SNSSAI) {
				t.Errorf("got %+v\nwant %+v", ids, tc.want)
			}
			var k IdentityKind
			for _, f := range []struct {
				k IdentityKind
				v string
			}{{IDSUPI, tc.want.SUPI}, {IDSUCI, tc.want.SUCI}, {IDGPSI, tc.want.GPSI}, {IDPEI, tc.want.PEI}, {IDDNN, tc.want.DNN}, {IDSNSSAI, tc.want.SNSSAI}} {
				if f.v != "" {
					k |= f.k
				}
			}
			if got != k {
				t.Errorf("found %b, want %b", got, k)
			}
		})
	}
	// Only what is asked for is looked for.
	var ids Identities
	if ids.Find(IDGPSI, "/x/imsi-234300000000001", []byte(`{"gpsi":"msisdn-447700900123"}`)) != IDGPSI || ids.SUPI != "" {
		t.Errorf("%+v", ids)
	}
}

func FuzzFind(f *testing.F) {
	f.Add("/nudm-ueau/v1/suci-0-234-30-0-0-0-9000014975/x?dnn=a", `{"sNssai":{"sst":1,"sd":"000001"},"supi":"imsi-234300000000001"}`)
	f.Add("/", `{"sst":`)
	f.Add("?dnn", `{"sd":"1"}"sst":1}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		var ids Identities
		ids.Find(IDAll, path, []byte(body))
		for _, v := range []string{ids.SUPI, ids.SUCI, ids.GPSI, ids.PEI, ids.DNN} {
			if v != "" && !strings.Contains(path, v) && !strings.Contains(body, v) {
				t.Fatalf("%q found in neither input", v)
			}
		}
		SplitPath(path)
	})
}

func TestProblemCause(t *testing.T) {
	for body, want := range map[string]string{
		`{"title":"User not found","status":404,"cause":"USER_NOT_FOUND"}`: "USER_NOT_FOUND",
		`{"status":503,"detail":"overload"}`:                               "",
		`not json`:                                                         "",
		`{"cause":42}`:                                                     "",
		``:                                                                 "",
	} {
		if got := ProblemCause([]byte(body)); got != want {
			t.Errorf("ProblemCause(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestPLMNOf(t *testing.T) {
	for fqdn, want := range map[string]string{
		"sepp1.5gc.mnc030.mcc234.3gppnetwork.org":    "234-30",
		"udm.5gc.mnc310.mcc311.3gppnetwork.org":      "311-310",
		"mnc001.mcc001.3gppnetwork.org":              "001-01",
		"sepp.example.com":                           "",
		"x.mnc30.mcc234.3gppnetwork.org":             "",
		"x.mnc030.mcc23.3gppnetwork.org":             "",
		"x.mnc030.mcc2345":                           "",
		"nrf.5gc.mnc030.mcc234.3gppnetwork.org:8443": "234-30",
	} {
		if got := PLMNOf(fqdn); got != want {
			t.Errorf("PLMNOf(%q) = %q, want %q", fqdn, got, want)
		}
	}
}
