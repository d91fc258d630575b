package xdr

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
)

// TestDiameterTransactions: a DRA's request and answer copies join by their
// hop-by-hop and end-to-end ids into records that say what the messages
// said, failures counted under the result's name.
func TestDiameterTransactions(t *testing.T) {
	x, ck, _ := newTest(t, Config{})
	g := nfsim.NewDiameterGen(7)
	g.ErrRate = 0.5
	var out []Record
	want := map[string]nfsim.DiameterTxn{}
	ts := ck.Now().UnixNano()
	var c nfcopy.Copy
	for i := range 200 {
		tx, err := g.Next(ts+int64(i)*1000, 2_500_000)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range [][]byte{tx.Request, tx.Answer} {
			if err := nfcopy.Decode(rec, &c); err != nil {
				t.Fatal(err)
			}
			out = x.Add(&c, out)
		}
		want[c.CorrelationID] = tx
	}
	if len(out) != 200 || x.Pending() != 0 {
		t.Fatalf("%d records, %d pending", len(out), x.Pending())
	}
	failed := map[string]int{}
	for _, r := range out {
		tx, ok := want[r.CorrelationID]
		if !ok || r.Protocol != ProtocolDiameter || r.Diameter == nil || r.Result != ResultComplete || r.LatencyNs != 2_500_000 {
			t.Fatalf("record %+v", r)
		}
		d := r.Diameter
		if d.AppID != tx.AppID || d.Command != tx.Command || d.HopByHop != tx.HopByHop || d.EndToEnd != tx.EndToEnd ||
			d.ResultCode != tx.ResultCode || uint32(r.Status) != tx.ResultCode || r.SUPI != "imsi-"+tx.IMSI {
			t.Fatalf("record %+v %+v, want %+v", r, d, tx)
		}
		if d.OriginHost == "" || d.DestinationHost == "" || d.SessionID == "" || r.Producer != d.DestinationHost {
			t.Fatalf("hosts: %+v producer %q", d, r.Producer)
		}
		wantSvc, wantName := "s6a", map[uint32]string{nfsim.CmdULR: "ULR", nfsim.CmdAIR: "AIR"}[d.Command]
		if d.AppID == nfsim.AppGx {
			wantSvc, wantName = "gx", "CCR"
			if r.GPSI == "" {
				t.Errorf("Gx record without the Subscription-Id's MSISDN: %+v", r)
			}
		}
		if r.Service != wantSvc || d.CommandName != wantName || len(r.Hops) != 2 || r.Hops[1].Status != int(tx.ResultCode) {
			t.Fatalf("service %q command %q hops %+v", r.Service, d.CommandName, r.Hops)
		}
		if tx.ResultCode != 2001 {
			failed[r.Service+"/"+r.Cause]++
			if r.StatusClass() != "5xxx" {
				t.Errorf("class %q", r.StatusClass())
			}
		} else if r.Cause != "" || r.StatusClass() != "2xxx" {
			t.Errorf("success with cause %q class %q", r.Cause, r.StatusClass())
		}
	}
	if len(failed) != 2 || failed["s6a/DIAMETER_ERROR_USER_UNKNOWN"] == 0 || failed["gx/DIAMETER_USER_UNKNOWN"] == 0 {
		t.Fatalf("failures %v", failed)
	}
	for k, n := range failed {
		svc, cause, _ := strings.Cut(k, "/")
		if got := testutil.ToFloat64(x.m.failures.WithLabelValues("DRA", svc, cause)); int(got) != n {
			t.Errorf("failures{DRA,%s,%s} = %v, want %d", svc, cause, got, n)
		}
	}
	if got := testutil.ToFloat64(x.m.transactions.WithLabelValues("DRA", "s6a", "2xxx")); got == 0 {
		t.Error("no s6a 2xxx transactions counted")
	}
}

// TestDiameterTimeout: a request without its answer times out like an SBI one.
func TestDiameterTimeout(t *testing.T) {
	x, ck, _ := newTest(t, Config{Timeout: time.Second})
	tx, err := nfsim.NewDiameterGen(1).Next(ck.Now().UnixNano(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var c nfcopy.Copy
	if err := nfcopy.Decode(tx.Request, &c); err != nil {
		t.Fatal(err)
	}
	x.Add(&c, nil)
	ck.add(2 * time.Second)
	out := x.Expire(ck.Now(), nil)
	if len(out) != 1 || out[0].Result != ResultResponseTimeout || out[0].StatusClass() != "timeout" || out[0].Diameter.Command != tx.Command {
		t.Fatalf("%+v", out)
	}
}
