package director

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// TestDefaultSinks runs feeds with the real http2 and synthetic sinks.
func TestDefaultSinks(t *testing.T) {
	b := startBroker(t, broker.Config{})
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c nfcopy.Copy
		if err := nfcopy.Decode(body, &c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[c.CorrelationID]++
		mu.Unlock()
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var pcapBytes atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					pcapBytes.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()

	m, err := NewManager(Config{Client: b.ClientConfig(), Topics: testTopics[:3], Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	specs := []FeedSpec{
		{Name: "h2", Type: TypeHTTP2, Sources: []string{"SCP", "NRF"}, HTTP2Spec: HTTP2Spec{URL: srv.URL + "/copies"}},
		{Name: "pcap", Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: ln.Addr().String()}},
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	for i := range specs {
		if err := m.Prepare(actx, &specs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Apply(actx, specs); err != nil {
		t.Fatal(err)
	}
	const n = 500
	produce(t, producer(t, b), "h", 0, n, 0)
	testkit.WaitFor(t, 20*time.Second, "http2 consumer to get every copy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	testkit.WaitFor(t, 20*time.Second, "synthetic feed to deliver every copy", func() bool {
		st, _ := m.Status("pcap")
		return st.Delivered == n
	})
	// Each copy becomes at least one synthetic packet of more than its body.
	testkit.WaitFor(t, 30*time.Second, "pcap bytes", func() bool { return pcapBytes.Load() > n*100 })
	testkit.WaitFor(t, 30*time.Second, "h2 status to count every copy", func() bool {
		st, _ := m.Status("h2")
		return st.Delivered == n && st.State == StateConnected
	})
}

// TestFileFeedPcapUsesMappings: a file feed's pcap names the NFs by the
// feed's mappings, as a synthetic feed's stream does, when the copies carry
// no addresses (the mappings were once accepted and ignored).
func TestFileFeedPcapUsesMappings(t *testing.T) {
	m := offlineManager(t)
	dir := t.TempDir()
	spec := FeedSpec{Name: "export", Type: TypeFile, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir},
		SyntheticSpec: SyntheticSpec{Mappings: []AddrMapping{{NFFQDN: "scp1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: "192.0.2.77:8080"}}}}
	if err := m.Validate(&spec); err != nil {
		t.Fatal(err)
	}
	bad := spec
	bad.Mappings = []AddrMapping{{NFFQDN: "scp1", Addr: "scp1:80"}}
	var fe *FieldError
	if err := m.Validate(&bad); !errors.As(err, &fe) || fe.Field != "mappings[0].addr" {
		t.Fatalf("a file feed's bad mapping: %v, want a FieldError for mappings[0].addr", err)
	}
	s, err := m.defaultSink(&spec)
	if err != nil {
		t.Fatal(err)
	}
	var c nfcopy.Copy
	if err := nfcopy.Decode(fixture.Record("m-1", "SCP", nfcopy.RequestIngress), &c); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), []*nfcopy.Copy{&c}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "export*.pcap"))
	if len(files) != 1 {
		t.Fatalf("pcap files: %v, want one", files)
	}
	pcap, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(pcap, []byte{192, 0, 2, 77}) {
		t.Fatalf("the pcap (%d bytes) has no packet of the mapped address 192.0.2.77", len(pcap))
	}
}
