package director

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// xdrHandover runs a re-keyed xdr feed on two node processes while 3,000
// transactions stream in (SCP copies at four points, NRF copies at two, in
// their own topics, keyed apart as different vendors' producers would),
// and calls disrupt once a third of them is produced. It checks that every
// transaction comes out, and only as complete records: none partial, timed
// out or orphaned, and each transaction's records the same but for those
// that lack the copies of one NF (which came later than the linger, held
// up in the re-key stage). It returns the duplicates and the records
// lacking an NF's copies.
func xdrHandover(t *testing.T, b *testCluster, disrupt func(t *testing.T, nodes []*nodeProc, nc nodeConfig)) (dups, short int) {
	spec := FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, KafkaSpec: KafkaSpec{Topic: "probe.out"},
		XDR: &XDRSpec{Timeout: "5s", Linger: "300ms", Rekey: true}}
	h := newHarness(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.m.Prepare(ctx, &spec); err != nil {
		t.Fatal(err)
	}
	nc := nodeConfig{Kafka: b.ClientConfig(), Feeds: []FeedSpec{spec}, SessionTimeout: b.session}
	nodes := []*nodeProc{startNode(t, nc), startNode(t, nc)}
	// librdkafka's mock cluster can take tens of seconds to assign the
	// partitions a cooperative rebalance revoked.
	waitHeld(t, nodes, rekeyStage1Name("tx"), 6, 60*time.Second) // the re-key stage
	waitHeld(t, nodes, "tx", rekeyPartitions, 60*time.Second)    // the correlating stage

	const n = 3000
	pcl := producer(t, b)
	pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer pcancel()
	for i := 0; i < n; i++ {
		if i == n/3 {
			disrupt(t, nodes, nc)
		}
		id := fmt.Sprintf("tx-%04d", i)
		var recs []*kgo.Record
		for _, c := range []struct {
			nf  string
			dir nfcopy.Direction
		}{{"SCP", nfcopy.RequestIngress}, {"SCP", nfcopy.RequestEgress}, {"NRF", nfcopy.RequestIngress},
			{"NRF", nfcopy.ResponseEgress}, {"SCP", nfcopy.ResponseIngress}, {"SCP", nfcopy.ResponseEgress}} {
			recs = append(recs, &kgo.Record{Topic: c.nf, Key: []byte(c.nf + "/" + id), Value: nrfCopy(id, c.nf, c.dir)})
		}
		if err := pcl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if i%30 == 29 {
			time.Sleep(100 * time.Millisecond) // ~300 transactions/s
		}
	}

	// Read every record, until each transaction has one and nothing more
	// came for a timeout and a linger.
	rc, err := b.ClientConfig().NewClient(kgo.ConsumeTopics("probe.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	byID := map[string][]xdr.Record{}
	deadline := time.Now().Add(180 * time.Second) // the mock cluster's slow rebalances hold the clocks longest
	quiet := time.Now()
	for time.Now().Before(deadline) && (len(byID) < n || time.Since(quiet) < 6*time.Second) {
		fctx, fcancel := context.WithTimeout(context.Background(), time.Second)
		rc.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			var rec xdr.Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("record: %v", err)
			}
			byID[rec.CorrelationID] = append(byID[rec.CorrelationID], rec)
			quiet = time.Now()
		})
		fcancel()
	}
	results := map[string]int{}
	var bad []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("tx-%04d", i)
		rs := byID[id]
		if len(rs) == 0 {
			bad = append(bad, id+": no record")
			continue
		}
		full := 0
		for j, r := range rs {
			results[r.Result]++
			switch {
			case r.Result != xdr.ResultComplete:
				bad = append(bad, fmt.Sprintf("%s: record %d %s with %d copies", id, j, r.Result, r.Copies))
			case r.Copies == 2 || r.Copies == 4: // one NF's copies only: the other's came after the linger
				short++
			case r.Copies != 6:
				bad = append(bad, fmt.Sprintf("%s: record %d with %d copies", id, j, r.Copies))
			case full > 0 && hopKey(r) != hopKey(rs[0]):
				bad = append(bad, fmt.Sprintf("%s: record %d differs from the first: %s vs %s", id, j, hopKey(r), hopKey(rs[0])))
			default:
				full++
			}
		}
		dups += max(full-1, 0)
	}
	t.Logf("%d transactions: records by result %v; %d identical duplicates; %d records of one NF's copies only", n, results, dups, short)
	if len(bad) > 0 {
		t.Errorf("%d transactions with records neither complete nor the same; first: %v", len(bad), bad[:min(10, len(bad))])
	}
	return dups, short
}

// nrfCopy is a copy of an NF discovery an SCP routes to an NRF, made by
// the SCP or the NRF (nf) at dir: the NRF is the producer and copies too,
// so a transaction is complete only with the NRF's copies (the
// correlator's rule 4), however late they come.
func nrfCopy(id, nf string, dir nfcopy.Direction) []byte {
	c := &nfcopy.Copy{
		Version: "1.0.0", CorrelationID: id, Timestamp: time.Now().UnixNano(), Direction: dir, NFType: nf,
		NFFQDN: strings.ToLower(nf) + "1.5gc.mnc030.mcc234.3gppnetwork.org", NFInstanceID: strings.ToLower(nf) + "-1",
		ProducerID: "nrf-1", ProducerFQDN: "nrf1.5gc.mnc030.mcc234.3gppnetwork.org", HopByHopID: "1",
	}
	if dir.IsRequest() {
		c.Headers = []nfcopy.Header{{Name: ":method", Values: []string{"GET"}},
			{Name: ":path", Values: []string{"/nnrf-disc/v1/nf-instances?target-nf-type=UDM&requester-nf-type=AMF"}}}
	} else {
		c.Headers = []nfcopy.Header{{Name: ":status", Values: []string{"200"}}}
		c.Body = []byte(`{"validityPeriod":3600,"nfInstances":[]}`)
	}
	return nfcopy.AppendJSON(nil, c)
}

// hopKey is what makes two records of a transaction the same: its hops.
func hopKey(r xdr.Record) string {
	var hs []string
	for _, h := range r.Hops {
		hs = append(hs, h.NFType+"/"+h.Direction+"/"+h.HopByHopID)
	}
	slices.Sort(hs)
	return strings.Join(slices.Compact(hs), ",")
}
