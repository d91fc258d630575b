package director

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
)

// lockedBuffer is a capture's client that takes everything.
type lockedBuffer = testkit.SyncBuffer

// slowClient takes a write every 200 ms.
type slowClient struct{ testkit.SyncBuffer }

func (w *slowClient) Write(p []byte) (int, error) {
	time.Sleep(200 * time.Millisecond)
	return w.SyncBuffer.Write(p)
}

// TestCaptureSelects: a capture writes a pcap of the copies of its sources
// produced after it started, every one, and nothing of the other topics;
// its header comes first, before any copy.
func TestCaptureSelects(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	pcl := producer(t, b)
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan CaptureStats, 1)
	go func() {
		st, err := h.m.Capture(ctx, CaptureQuery{Sources: []string{"SCP"}, Directions: []string{"REQUEST_INGRESS"}}, &out, nil, nil)
		if err != nil {
			t.Errorf("capture: %v", err)
		}
		done <- st
	}()
	testkit.WaitFor(t, 30*time.Second, "the pcap header", func() bool { return out.Len() >= 24 })
	// Copies until the capture reads (it starts at the end of the topics).
	testkit.WaitFor(t, 20*time.Second, "the capture to read", func() bool {
		produce(t, pcl, "warm", 1, 2, 0) // SCP
		time.Sleep(100 * time.Millisecond)
		return testutil.ToFloat64(h.m.m.captureCopies) > 0
	})
	time.Sleep(300 * time.Millisecond)
	before := testutil.ToFloat64(h.m.m.captureCopies)
	produce(t, pcl, "c", 0, 300, 0) // ids 0, 3, 6, ... go to NRF: 200 SCP copies
	testkit.WaitForState(t, 20*time.Second, "200 SCP copies", func() (bool, string) {
		got := testutil.ToFloat64(h.m.m.captureCopies) - before
		return got >= 200, fmt.Sprintf("captured %v", got)
	})
	time.Sleep(300 * time.Millisecond) // nothing more comes
	cancel()
	st := <-done
	if got := float64(st.Copies) - before; got != 200 || st.Dropped != 0 {
		t.Errorf("captured %v of the 200 SCP copies (dropped %d)", got, st.Dropped)
	}
	if magic := binary.LittleEndian.Uint32(out.Bytes()); magic != 0xa1b23c4d {
		t.Errorf("the stream begins %#x, not a pcap header", magic)
	}
	if v := testutil.ToFloat64(h.m.m.capturesActive); v != 0 {
		t.Errorf("%v captures active after the end", v)
	}
}

// TestCaptureSlowClientLoses: a client that reads more slowly than copies
// arrive loses those beyond the capture's buffer, counted, while a feed of
// the same copies delivers every one; the capture ends at its duration.
func TestCaptureSlowClientLoses(t *testing.T) {
	b := startBroker(t, broker.Config{})
	rcv := newReceiver(t)
	h := newHarness(t, b, func(c *Config) { c.CaptureBuffer = 32 << 10 })
	pcl := producer(t, b)
	h.apply(FeedSpec{Name: "steady", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: rcv.addr}})
	var out slowClient
	done := make(chan CaptureStats, 1)
	start := time.Now()
	go func() {
		st, err := h.m.Capture(context.Background(), CaptureQuery{Duration: 4 * time.Second}, &out, nil, nil)
		if err != nil {
			t.Errorf("capture: %v", err)
		}
		done <- st
	}()
	time.Sleep(time.Second) // the capture reads from the end: let it start
	const n = 3000
	produce(t, pcl, "s", 0, n, 0)
	testkit.WaitFor(t, 30*time.Second, "the feed to deliver every copy", func() bool { return len(rcv.missing("s", n)) == 0 })
	var st CaptureStats
	select {
	case st = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the capture did not end at its duration")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a 4 s capture ended after %s", d)
	}
	if st.Dropped == 0 || float64(st.Dropped) != testutil.ToFloat64(h.m.m.captureDropped) {
		t.Errorf("a slow client: %+v, signalbox_capture_dropped_total %v", st, testutil.ToFloat64(h.m.m.captureDropped))
	}
	t.Logf("slow client: %d copies written, %d dropped", st.Copies, st.Dropped)
}

// TestCaptureRefusesBadQueries: each mistake is a FieldError naming its
// field, before anything is written.
func TestCaptureRefusesBadQueries(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	for _, c := range []struct {
		q     CaptureQuery
		field string
	}{
		{CaptureQuery{Sources: []string{"AMF"}}, "sources[0]"},
		{CaptureQuery{Filter: "status >>= 4"}, "filter"},
		{CaptureQuery{SUPI: "imsi-12ab"}, "supi"},
		{CaptureQuery{GPSI: "123"}, "gpsi"},
		{CaptureQuery{Directions: []string{"SIDEWAYS"}}, "directions[0]"},
		{CaptureQuery{Duration: -time.Second}, "duration"},
	} {
		var out lockedBuffer
		_, err := h.m.Capture(context.Background(), c.q, &out, nil, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || out.Len() != 0 {
			t.Errorf("%+v: %v (wrote %d bytes), want a FieldError of %s", c.q, err, out.Len(), c.field)
		}
	}
}
