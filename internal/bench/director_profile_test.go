package bench

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

var (
	profRate = flag.Float64("dirpath.rate", 30000, "BenchmarkDirectorPath: copies per second")
	profDur  = flag.Duration("dirpath.duration", 3*time.Second, "BenchmarkDirectorPath: traffic per iteration")
	profComp = flag.String("dirpath.compression", "snappy", "BenchmarkDirectorPath: producer compression")
)

// BenchmarkDirectorPath runs the whole path in one process, for pprof
// (-cpuprofile): embedded broker, nfsim at the reference mix, the director
// with one TLS synthetic feed, and a probe. It reports CPU µs per copy of
// the whole path and the probe's latency.
func BenchmarkDirectorPath(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	topics := []broker.TopicSpec{{Name: "SCP", Partitions: 12}, {Name: "NRF", Partitions: 6}, {Name: "SEPP", Partitions: 6}}
	br, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(dir, "kafka"), Topics: topics}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	cert, key, err := writeSelfSigned(dir)
	if err != nil {
		b.Fatal(err)
	}
	p, err := probe.New(probe.Config{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	m, err := director.NewManager(director.Config{Client: br.ClientConfig(), Topics: topics, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = m.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	spec := director.FeedSpec{Name: "bench", Type: director.TypeSynthetic, Sources: []string{"SCP", "NRF", "SEPP"},
		SyntheticSpec: director.SyntheticSpec{Endpoint: p.Addr()}, Start: "earliest", TLS: &director.TLSSpec{Enabled: true, CAFile: cert, ServerName: "localhost"}}
	if err := m.Prepare(ctx, &spec); err != nil {
		b.Fatal(err)
	}
	if err := m.Apply(ctx, []director.FeedSpec{spec}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := selfSample()
	var sent int64
	for i := 0; i < b.N; i++ {
		st, err := nfsim.Run(ctx, nfsim.Config{Brokers: br.Addrs(), Rate: *profRate, Duration: *profDur, Progress: time.Hour, Compression: *profComp}, nopWriter{})
		if err != nil {
			b.Fatal(err)
		}
		sent += st.Total()
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Snapshot().Unique < sent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	end := selfSample()
	b.StopTimer()
	r := p.Snapshot()
	if r.Unique != sent {
		b.Fatalf("probe saw %d of %d", r.Unique, sent)
	}
	b.ReportMetric(float64((end.CPU-start.CPU).Microseconds())/float64(sent), "cpu-us/copy")
	b.ReportMetric(r.Latency.Avg/1000, "avg-ms")
	b.ReportMetric(float64(r.Latency.P99)/1000, "p99-ms")
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
