package probe

import (
	"bytes"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// TestSyntheticDiameter: a stream of Diameter flows beside HTTP/2 ones,
// with an MSS that splits messages over segments: every message counted,
// nothing invalid.
func TestSyntheticDiameter(t *testing.T) {
	g := nfsim.NewDiameterGen(5)
	var batch []*nfcopy.Copy
	for i := range 100 {
		tx, err := g.Next(time.Now().UnixNano()+int64(i)*1000, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range [][]byte{tx.Request, tx.Answer} {
			var c nfcopy.Copy
			if err := nfcopy.Decode(rec, &c); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, c.Clone())
		}
		c := testCopy("SCP", int64(i+1), 500)
		c.SourceIP, c.SourcePort, c.DestIP, c.DestPort = "10.0.0.1", 40000, "10.0.0.2", 8080
		batch = append(batch, c)
	}
	r := probeBatch(t, synthetic.EncoderOptions{MSS: 100}, batch)
	if r.Received != 300 || r.PerNF[diameterLabel] != 200 || r.PerNF["SCP"] != 100 || r.Invalid != 0 {
		t.Fatalf("received %d per NF %v invalid %d %v (%v)", r.Received, r.PerNF, r.Invalid, r.InvalidReasons, r.FirstErrors)
	}

	// A broken message header on a Diameter flow is invalid, counted once.
	var bad bytes.Buffer
	sw := newStreamWriter(t, &bad)
	sw.port = diameterPort
	sw.packet([]byte{2, 0, 0, 20, 0x80, 0, 1, 0x3c, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}, time.Now(), false)
	s := newStats(0, "")
	if err := newConnDecoder(s).run(&bad); err != nil {
		t.Fatal(err)
	}
	if r := s.report(ModeSynthetic); r.Invalid != 1 || r.InvalidReasons["bad_diameter"] != 1 {
		t.Fatalf("report %+v", r)
	}
}
