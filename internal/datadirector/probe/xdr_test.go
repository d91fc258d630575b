package probe

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestXDRRecords: in http2 mode the probe validates transaction records from
// an xdr feed: counted once per correlation id, by result; bad ones invalid.
func TestXDRRecords(t *testing.T) {
	p := startProbe(t, Config{Listen: "127.0.0.1:0", Mode: ModeHTTP2})
	defer p.Close()
	end := time.Now().Add(-2 * time.Millisecond).UnixNano()
	rec := func(id, result string) string {
		return `{"correlation_id":"` + id + `","service":"nudm-ueau","method":"POST","status":200,"hops":[{"nf_type":"SCP","direction":"REQUEST_INGRESS","timestamp":1}],"start":` +
			"1" + `,"end":` + strconv.FormatInt(end, 10) + `,"result":"` + result + `"}`
	}
	body := rec("a", "complete") + "\n" + rec("b", "response_timeout") + "\n" + rec("a", "complete") + "\n" +
		rec("c", "maybe") + "\n" + `{"correlation_id":"d","hops":[],"result":"complete","start":1,"end":2}` + "\n"
	resp, err := http.Post("http://"+p.Addr()+"/records", "application/x-ndjson", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := p.Snapshot()
	if r.Unique != 2 || r.Duplicates != 1 || r.Invalid != 2 || r.Records["complete"] != 1 || r.Records["response_timeout"] != 1 ||
		r.InvalidReasons["xdr_bad_result"] != 1 || r.InvalidReasons["xdr_missing_field"] != 1 || r.Latency.Count != 2 {
		t.Fatalf("report %+v", r)
	}
}
