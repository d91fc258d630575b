package director

import (
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

func TestSequencerPutsRequestsFirst(t *testing.T) {
	mk := func(id string, dir nfcopy.Direction) *nfcopy.Copy {
		return &nfcopy.Copy{CorrelationID: id, HopByHopID: "1", Direction: dir, NFInstanceID: "scp-1"}
	}
	aReq, aResp := mk("a", nfcopy.RequestIngress), mk("a", nfcopy.ResponseEgress)
	bReq, bResp := mk("b", nfcopy.RequestEgress), mk("b", nfcopy.ResponseIngress)
	cResp := mk("c", nfcopy.ResponseEgress) // its request was in an earlier poll
	dReq := mk("d", nfcopy.RequestIngress)
	batch := []*nfcopy.Copy{aResp, cResp, bResp, aReq, dReq, bReq}
	var s sequencer
	if n := s.sequence(batch); n != 2 {
		t.Errorf("moved %d, want 2", n)
	}
	want := []*nfcopy.Copy{cResp, aReq, aResp, dReq, bReq, bResp}
	for i := range want {
		if batch[i] != want[i] {
			t.Fatalf("position %d: %s %v, want %s %v", i, batch[i].CorrelationID, batch[i].Direction, want[i].CorrelationID, want[i].Direction)
		}
	}
	// In order already: nothing moves; the state does not leak into the next batch.
	if n := s.sequence([]*nfcopy.Copy{aReq, aResp, bReq, bResp}); n != 0 {
		t.Errorf("an ordered batch moved %d", n)
	}
}
