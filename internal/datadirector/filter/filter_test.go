package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/expr-lang/expr"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

const reqPath = "/nudm-ueau/v1/imsi-234300000014975/security-information/generate-auth-data?x=1"

func reqCopy() *nfcopy.Copy {
	c := &nfcopy.Copy{
		Version: "1.0.0", CorrelationID: "ff561bdb-1", ProducerID: "udm-id", ProducerFQDN: "udm1.example",
		ConsumerID: "ausf-id", ConsumerFQDN: "ausf1.example", HopByHopID: "1", Timestamp: 1678705695995010066,
		Direction: nfcopy.RequestIngress, NFType: "SCP", NFFQDN: "scp901.example", NFInstanceID: "scp-id",
		PodInstanceID: "scp901-worker-1", SourceIP: "10.0.0.1", DestIP: "10.0.0.2", SourcePort: 40001, DestPort: 8080,
		Headers: []nfcopy.Header{
			{Name: ":method", Values: []string{"POST"}},
			{Name: ":path", Values: []string{reqPath}},
			{Name: "Content-Type", Values: []string{"application/json"}},
			{Name: "user-agent", Values: []string{"AUSF-auth"}},
			{Name: "3gpp-sbi-target-apiroot", Values: []string{"http://10.251.74.72:8080", "second"}},
		},
		Body: []byte(`{"servingNetworkName":"5G:mnc030.mcc234.3gppnetwork.org","suci":"suci-0-234-30-0-0-0-9000014975",` +
			`"gpsi":"msisdn-447700900123","pei":"imeisv-3512345678901234","dnn":"internet","sNssai":{"sst":1,"sd":"000001"}}`),
	}
	c.Raw = make([]byte, 3000)
	return c
}

func respCopy() *nfcopy.Copy {
	return &nfcopy.Copy{
		CorrelationID: "ff561bdb-1", Direction: nfcopy.ResponseEgress, NFType: "NRF", NFFQDN: "nrf1.example",
		Headers: []nfcopy.Header{{Name: ":status", Values: []string{"404"}}, {Name: "content-type", Values: []string{"application/problem+json"}}},
		Body:    []byte(`{"title":"USER_NOT_FOUND","status":404}`),
		Raw:     make([]byte, 1500),
	}
}

// TestFields covers every field: an expression true on the request copy and
// one true on the response copy.
func TestFields(t *testing.T) {
	tests := []struct {
		field     string
		onReq     string
		onResp    string
		notOnResp bool // onReq must be false on the response copy
	}{
		{"nf_type", `nf_type == "SCP"`, `nf_type == "NRF"`, true},
		{"nf_fqdn", `nf_fqdn endsWith ".example" && nf_fqdn startsWith "scp"`, `nf_fqdn == "nrf1.example"`, true},
		{"nf_instance_id", `nf_instance_id == "scp-id"`, `nf_instance_id == ""`, true},
		{"pod", `pod contains "worker"`, `pod == ""`, true},
		{"direction", `direction == "REQUEST_INGRESS"`, `direction in ["RESPONSE_EGRESS", "RESPONSE_INGRESS"]`, true},
		{"method", `method == "POST"`, `method == ""`, true},
		{"path", `path == "` + reqPath + `"`, `path == ""`, true},
		{"service", `service == "nudm-ueau"`, `service == ""`, true},
		{"api_version", `api_version == "v1"`, `api_version == ""`, true},
		{"resource", `resource == "imsi-234300000014975/security-information/generate-auth-data"`, `resource == ""`, true},
		{"status", `status == 0`, `status >= 400 && status < 500`, true},
		{"content_type", `content_type == "application/json"`, `content_type == "application/problem+json"`, true},
		{"correlation_id", `correlation_id == "ff561bdb-1"`, `correlation_id == "ff561bdb-1"`, false},
		{"producer_fqdn", `producer_fqdn == "udm1.example"`, `producer_fqdn == ""`, true},
		{"producer_id", `producer_id == "udm-id"`, `producer_id == ""`, true},
		{"consumer_fqdn", `consumer_fqdn == "ausf1.example"`, `consumer_fqdn == ""`, true},
		{"consumer_id", `consumer_id == "ausf-id"`, `consumer_id == ""`, true},
		{"source_ip", `source_ip == "10.0.0.1"`, `source_ip == ""`, true},
		{"destination_ip", `destination_ip == "10.0.0.2"`, `destination_ip == ""`, true},
		{"source_port", `source_port == 40001`, `source_port == 0`, true},
		{"destination_port", `destination_port in [8080, 443]`, `destination_port == 0`, true},
		{"user_agent", `user_agent == "AUSF-auth"`, `user_agent == ""`, true},
		{"timestamp", `timestamp > 1678705695995010000`, `timestamp == 0`, true},
		{"size", `size > 2000`, `size == 1500`, true},
		{"supi", `supi == "imsi-234300000014975"`, `supi == ""`, true},
		{"imsi", `imsi == "234300000014975"`, `imsi == ""`, true},
		{"suci", `suci == "suci-0-234-30-0-0-0-9000014975"`, `suci == ""`, true},
		{"gpsi", `gpsi == "msisdn-447700900123"`, `gpsi == ""`, true},
		{"msisdn", `msisdn == "447700900123"`, `msisdn == ""`, true},
		{"pei", `pei == "imeisv-3512345678901234"`, `pei == ""`, true},
		{"imei", `imei == "3512345678901234"`, `imei == ""`, true},
		{"dnn", `dnn == "internet"`, `dnn == ""`, true},
		{"snssai", `snssai == "1-000001"`, `snssai == ""`, true},
		{"header", `header["3gpp-sbi-target-apiroot"] == "http://10.251.74.72:8080" && header["content-type"] == "application/json"`, `header[":status"] == "404"`, true},
	}
	covered := map[string]bool{}
	for _, tc := range diameterFieldTests {
		covered[tc.field] = true
	}
	for _, tc := range tests {
		covered[tc.field] = true
		t.Run(tc.field, func(t *testing.T) {
			for _, c := range []struct {
				src  string
				copy *nfcopy.Copy
				want bool
			}{{tc.onReq, reqCopy(), true}, {tc.onResp, respCopy(), true}, {tc.onReq, respCopy(), !tc.notOnResp}} {
				f, err := Compile(c.src)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := f.Eval(c.copy); err != nil || got != c.want {
					t.Errorf("%s on %s = %v, %v; want %v", c.src, c.copy.Direction, got, err, c.want)
				}
				// The slow obvious evaluation agrees.
				if got := oracle(t, c.src, c.copy); got != c.want {
					t.Errorf("oracle: %s on %s = %v", c.src, c.copy.Direction, got)
				}
			}
		})
	}
	for _, d := range Fields() {
		if !covered[d.Name] {
			t.Errorf("field %s has no test", d.Name)
		}
		if d.Description == "" || d.Type == "" {
			t.Errorf("field %s undocumented", d.Name)
		}
	}
}

// oracle evaluates src with every field extracted and boxed, and no
// rewriting: the slow obvious implementation.
func oracle(t testing.TB, src string, c *nfcopy.Copy) bool {
	t.Helper()
	env := oracleEnv(c)
	p, err := expr.Compile(src, expr.Env(env), expr.AsBool())
	if err != nil {
		t.Fatalf("oracle compile %q: %v", src, err)
	}
	out, err := expr.Run(p, env)
	if err != nil {
		return false
	}
	return out.(bool)
}

func oracleEnv(c *nfcopy.Copy) map[string]any {
	var x extraction
	x.reset(c, xdr.IDAll)
	env := map[string]any{}
	dia := map[string]any{}
	env[diameterPrefix] = dia
	for i, f := range fields {
		if sub, ok := strings.CutPrefix(f.name, diameterPrefix+"."); ok {
			if f.kind == kInt {
				dia[sub] = x.num(fieldID(i))
			} else {
				dia[sub] = x.str(fieldID(i))
			}
			continue
		}
		switch f.kind {
		case kString:
			env[f.name] = x.str(fieldID(i))
		case kInt:
			env[f.name] = x.num(fieldID(i))
		case kMap:
			m := map[string]string{}
			headerMap(c, m)
			env[f.name] = m
		}
	}
	return env
}

func TestExamples(t *testing.T) {
	scpErr := respCopy()
	scpErr.NFType = "SCP"
	seppPost := reqCopy()
	seppPost.NFType = "SEPP"
	udmReq := reqCopy()
	udmReq.Headers[1].Values = []string{"/nudm-sdm/v2/imsi-234309999999999/am-data"}
	udmReq.Body = nil
	noTarget := reqCopy()
	noTarget.Headers = noTarget.Headers[:4]
	small := reqCopy()
	small.Raw = small.Raw[:100]

	tests := []struct {
		src  string
		c    *nfcopy.Copy
		want bool
	}{
		{`nf_type in ["SCP","SEPP"] && method == "POST" && status >= 400`, scpErr, false}, // a response has no method
		{`nf_type in ["SCP","SEPP"] && status >= 400`, scpErr, true},
		{`nf_type in ["SCP","SEPP"] && method == "POST" && status >= 400`, seppPost, false}, // a request has status 0
		{`nf_type in ["SCP","SEPP"] && method == "POST"`, seppPost, true},
		{`supi == "imsi-234300000014975" || service == "nudm-ueau"`, reqCopy(), true},
		{`supi == "imsi-234300000014975" || service == "nudm-ueau"`, udmReq, false},
		{`supi == "imsi-234309999999999"`, udmReq, true},
		{`header["3gpp-sbi-target-apiroot"] != ""`, reqCopy(), true},
		{`header["3gpp-sbi-target-apiroot"] != ""`, noTarget, false},
		{`header["3GPP-Sbi-Target-apiRoot"] != ""`, reqCopy(), true},
		{`header.server == ""`, reqCopy(), true},
		{`direction == "REQUEST_INGRESS"`, reqCopy(), true},
		{`direction == "REQUEST_INGRESS"`, respCopy(), false},
		{`size > 2000`, reqCopy(), true},
		{`size > 2000`, small, false},
		// Reversed operands, not in, closures and VM-only operations.
		{`"POST" == method and 2000 < size`, reqCopy(), true},
		{`nf_type not in ["SCP"]`, reqCopy(), false},
		{`not (method in ["GET"])`, reqCopy(), true},
		{`any(["a", "POST"], # == method)`, reqCopy(), true},
		{`path matches "^/nudm-[a-z]+/v1/"`, reqCopy(), true},
		{`len(supi) == 20 && upper(method) == "POST"`, reqCopy(), true},
		{`status + 1 > 400`, respCopy(), true},
		{`size > 2.5`, reqCopy(), true},
		{`header[lower("Content-Type")] == "application/json"`, reqCopy(), true},
		{`"content-type" in header`, reqCopy(), true},
		{`$env.method == "POST" && $env["supi"] != ""`, reqCopy(), true},
		{`let m = method; m == "POST"`, reqCopy(), true},
		{`dnn == "internet" and snssai startsWith "1-"`, reqCopy(), true},
		{`[1, 2][status] == 3`, respCopy(), false}, // run-time error: no match
	}
	for _, tc := range tests {
		f, err := Compile(tc.src)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got := f.Match(tc.c); got != tc.want {
			t.Errorf("%s on %s %s: %v, want %v", tc.src, tc.c.NFType, tc.c.Direction, got, tc.want)
		}
		// The oracle's header map has the names as sent; the filter lowers
		// constant header names, so skip it for mixed-case names.
		if strings.Contains(tc.src, "3GPP") {
			continue
		}
		if got := oracle(t, tc.src, tc.c); got != tc.want {
			t.Errorf("oracle disagrees on %s", tc.src)
		}
		if f.String() != tc.src {
			t.Errorf("String() = %q", f.String())
		}
	}
}

func TestRunTimeError(t *testing.T) {
	f, err := Compile(`[1, 2][status] == 3`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Eval(respCopy()); ok || err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("Eval = %v, %v", ok, err)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		src       string
		line, col int
		msg       string
	}{
		{``, 0, 0, "empty expression"},
		{`   `, 0, 0, "empty expression"},
		{`method ==`, 1, 9, "unexpected token EOF"},
		{`nf_typo == "SCP"`, 1, 1, "unknown name nf_typo"},
		{"method == \"POST\" &&\n  sttus > 1", 2, 3, "unknown name sttus"},
		{`status`, 1, 1, "expected bool"},
		{`method`, 1, 1, "expected bool"},
		{`status == "404"`, 1, 8, "mismatched types int and string"},
		{`method > 3`, 1, 8, "mismatched types string and int"},
		{`header["x"] == 1`, 1, 13, "mismatched types string and int"},
		{`let status = 1; status == 1`, 1, 5, `variable "status" shadows a field`},
		{`method in ["GET", 1]`, 0, 0, ""}, // allowed by expr: mixed array
		{`"` + strings.Repeat("a", MaxExprLen) + `"`, 0, 0, "longer than"},
		{strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300), 0, 0, ""},
		{strings.Repeat("1+", 2100) + "1 == 1", 1, 2002, "exceeds maximum allowed nodes"},
		{`diameter.app_idd == 4`, 1, 10, `unknown Diameter field "diameter.app_idd" (known: app_id, command,`},
		{`diameter["app_id"] == 16777251`, 0, 0, ""},
		{`diameter[method] == 4`, 1, 9, `unknown Diameter field "diameter.<name>"`},
		{`diameter.command == "ULR"`, 1, 18, "mismatched types int and string"},
		{`diameter == 1`, 1, 1, "unknown name diameter"},
	}
	for _, tc := range tests {
		_, err := Compile(tc.src)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%.40q: %v", tc.src, err)
			}
			continue
		}
		var fe *Error
		if !errors.As(err, &fe) {
			t.Errorf("%.40q: error %v, want *Error", tc.src, err)
			continue
		}
		if fe.Line != tc.line || fe.Column != tc.col || !strings.Contains(fe.Msg, tc.msg) || fe.Expr != tc.src {
			t.Errorf("%.40q: got line %d col %d %q, want %d %d %q", tc.src, fe.Line, fe.Column, fe.Msg, tc.line, tc.col, tc.msg)
		}
		if !strings.Contains(fe.Error(), tc.msg) {
			t.Errorf("Error() = %q", fe.Error())
		}
	}
}

func TestLazyExtraction(t *testing.T) {
	tests := []struct {
		src    string
		boxed  []string
		preds  int
		hdrs   int
		idWant xdr.IdentityKind
		allHdr bool
	}{
		{`nf_type in ["SCP","SEPP"] && method == "POST" && status >= 400`, nil, 3, 0, 0, false},
		{`supi == "imsi-234300000014975" || service == "nudm-ueau"`, nil, 2, 0, xdr.IDSUPI, false},
		{`header["3gpp-sbi-target-apiroot"] != ""`, nil, 1, 0, 0, false},
		{`len(header["x"]) > 0`, nil, 0, 1, 0, false},
		{`path matches "^/n"`, []string{"path"}, 0, 0, 0, false},
		{`imei matches "^35"`, []string{"imei"}, 0, 0, xdr.IDPEI, false},
		{`header[method] == ""`, []string{"method"}, 0, 0, 0, true},
	}
	for _, tc := range tests {
		f, err := Compile(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		var boxed []string
		for _, b := range f.boxed {
			boxed = append(boxed, b.key)
		}
		if fmt.Sprint(boxed) != fmt.Sprint(tc.boxed) && !(len(boxed) == 0 && len(tc.boxed) == 0) ||
			len(f.preds) != tc.preds || len(f.hdrs) != tc.hdrs || f.idWant != tc.idWant || f.allHdr != tc.allHdr {
			t.Errorf("%s: boxed %v preds %d hdrs %d ids %b allHdr %v", tc.src, boxed, len(f.preds), len(f.hdrs), f.idWant, f.allHdr)
		}
	}
}

func TestConcurrentMatch(t *testing.T) {
	f, err := Compile(`(supi == "imsi-234300000014975" && size > 2000) || path matches "sdm"`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				c, want := reqCopy(), true
				if (g+i)%2 == 1 {
					c.Headers[1].Values = []string{"/nudm-ueau/v1/imsi-234300000000001/x"}
					want = false
				}
				if f.Match(c) != want {
					t.Errorf("goroutine %d copy %d: wrong result", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestNotRetained: Match must not keep the copy (its buffer is reused).
func TestNotRetained(t *testing.T) {
	f, err := Compile(`path startsWith "/nudm" && supi matches "^imsi"`)
	if err != nil {
		t.Fatal(err)
	}
	c := reqCopy()
	f.Match(c)
	st := f.pool.Get().(*state)
	defer f.pool.Put(st)
	for k, v := range st.env {
		if s, ok := v.(string); ok && s != "" {
			t.Errorf("pooled env holds %s = %q", k, s)
		}
	}
	if st.x.c != nil {
		t.Errorf("pooled state holds the copy")
	}
}

func TestRecordFilter(t *testing.T) {
	r := &xdr.Record{CorrelationID: "c1", Service: "nudm-ueau", APIVersion: "v1", Method: "POST", Path: "/nudm-ueau/v1/x",
		Status: 504, SUPI: "imsi-234300000014975", GPSI: "msisdn-447700900123", Result: xdr.ResultComplete,
		Hops:         []xdr.Hop{{NFType: "SCP"}, {NFType: "NRF"}, {NFType: "SCP"}},
		HopLatencies: []xdr.HopLatency{{NFType: "SCP"}, {NFType: "NRF"}},
		LatencyNs:    150_000_000, Copies: 3, Duplicates: 1}
	tests := []struct {
		src  string
		want bool
	}{
		{`service == "nudm-ueau" && status_class == "5xx"`, true},
		{`"NRF" in nf_types && latency_ms > 100`, true},
		{`nf_type == "SCP" && result == "complete"`, true},
		{`supi == "imsi-234300000014975" and gpsi endsWith "123"`, true},
		{`latency_ms < 100`, false},
		{`duplicates > 0 && copies == hops && !evicted`, true},
		{`result in ["response_timeout", "orphan_response"]`, false},
	}
	for _, tc := range tests {
		f, err := CompileRecord(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got := f.Match(r); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.src, got, tc.want)
		}
	}
	for _, bad := range []string{``, `method ==`, `unknown == 1`, `status`, `latency_ms == "x"`} {
		var fe *Error
		if _, err := CompileRecord(bad); !errors.As(err, &fe) {
			t.Errorf("%q: %v, want *Error", bad, err)
		}
	}
	if len(RecordFields()) != len(recordFields) || RecordFields()[0].Type != "string" {
		t.Errorf("RecordFields %+v", RecordFields())
	}
}
