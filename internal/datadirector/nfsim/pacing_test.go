package nfsim

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/signalbox/signalbox/internal/datadirector/probe"
	"github.com/signalbox/signalbox/internal/testkit"
)

// BenchmarkRunToProbe runs the simulator at 60,000 copies/s of 3000 bytes
// into the probe's HTTP/2 ingest for one second per op (run with
// -benchtime=1x): it reports the achieved rate and the probe's latency.
func BenchmarkRunToProbe(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := probe.New(probe.Config{Listen: "127.0.0.1:0", Mode: probe.ModeHTTP2})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	start := testkit.CPUTime()
	var sent int64
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		st, err := Run(ctx, Config{Ingest: "http://" + p.Addr(), Rate: 60000, Count: 60000, Size: 3000}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		sent += st.Total()
		elapsed += st.Elapsed
	}
	b.StopTimer()
	r := p.Snapshot()
	if r.Unique != sent || r.Invalid != 0 || r.Missing != 0 {
		b.Fatalf("probe saw %+v, sent %d", r, sent)
	}
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "copies/s")
	b.ReportMetric(float64(r.Latency.P99), "p99-us")
	b.ReportMetric(float64(testkit.CPUTime()-start)/float64(sent), "cpu-ns/copy")
}

// BenchmarkRunKafka runs the simulator at 60,000 copies/s of 3000 bytes into
// an in-process kfake broker for one second per op (-benchtime=1x).
func BenchmarkRunKafka(b *testing.B) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "SCP", "NRF", "SEPP"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	start := testkit.CPUTime()
	var sent int64
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		st, err := Run(context.Background(), Config{Brokers: cl.ListenAddrs(), Rate: 60000, Count: 60000, Size: 3000}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		sent += st.Total()
		elapsed += st.Elapsed
	}
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "copies/s")
	b.ReportMetric(float64(testkit.CPUTime()-start)/float64(sent), "cpu-ns/copy")
}
