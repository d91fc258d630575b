package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestRunDirector runs the scenario briefly at 2,000 MPS, with separate
// processes and in-process, and checks the report: nothing lost, per-NF
// counts adding up, latency and CPU measured.
func TestRunDirector(t *testing.T) {
	bin := testkit.Binary(t)
	tests := []struct {
		name string
		args []string
	}{
		{"processes tls synthetic", nil},
		{"inprocess plain synthetic", []string{"-inprocess", "-tls=false"}},
		{"kafka feed", []string{"-feed", "kafka"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jf := filepath.Join(t.TempDir(), "r.json")
			args := append([]string{"-bin", bin, "-rate", "2000", "-duration", "3s", "-warmup", "1s", "-json", jf}, tt.args...)
			var out, errOut bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := RunDirector(ctx, args, &out, &errOut); err != nil {
				t.Fatalf("RunDirector: %v\n%s\n%s", err, out.String(), errOut.String())
			}
			b, err := os.ReadFile(jf)
			if err != nil {
				t.Fatal(err)
			}
			var r dirReport
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if !r.Pass || len(r.Results) != 1 {
				t.Fatalf("report not passing or no feed result: %s", b)
			}
			f := r.Results[0]
			// 3 s at 2,000 MPS; the race detector slows the in-process
			// producer, so only a loose lower bound.
			if r.SentTotal < 4000 || r.SentTotal > 6500 || f.Unique != r.SentTotal || f.Lost != 0 || f.Invalid != 0 {
				t.Fatalf("sent %d, unique %d, lost %d, invalid %d", r.SentTotal, f.Unique, f.Lost, f.Invalid)
			}
			var perNF int64
			for nf, n := range r.Sent {
				if f.PerNF[nf] != n {
					t.Errorf("%s: delivered %d, sent %d", nf, f.PerNF[nf], n)
				}
				perNF += n
			}
			if perNF != r.SentTotal || len(r.Sent) != 3 {
				t.Errorf("per-NF sent %v does not add up to %d", r.Sent, r.SentTotal)
			}
			if f.Warmup < 1000 {
				t.Errorf("warm-up copies %d: the warm-up was not excluded", f.Warmup)
			}
			if f.Latency.Count != f.Received || f.Latency.P50 <= 0 || f.Latency.P99 < f.Latency.P50 || f.Latency.Max < f.Latency.P99 {
				t.Errorf("latency not sane: %+v (received %d)", f.Latency, f.Received)
			}
			if r.Serve.CPUSeconds <= 0 || r.Serve.PeakRSSMiB <= 0 {
				t.Errorf("serve usage not measured: %+v", r.Serve)
			}
			if !strings.Contains(out.String(), "e2e latency ms") {
				t.Errorf("table lacks the latency line:\n%s", out.String())
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("1234 (sig nal) box)) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 12 0 100 2000 300")
	cpu, err := parseProcStat(stat)
	if err != nil || cpu != 3*time.Second {
		t.Fatalf("parseProcStat = %v, %v; want 3s", cpu, err)
	}
	if _, err := parseProcStat([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat line accepted")
	}
	if got := parseVmHWM([]byte("Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t1 kB\n")); got != 123456 {
		t.Fatalf("parseVmHWM = %d", got)
	}
}

func TestParseNFSimSummary(t *testing.T) {
	out := "nfsim m1: sent 10 (5/s), errors 0\nnfsim m1: done in 3.001s\n  NF               sent\n  NRF               833\n" +
		"  SCP              2667\n  SEPP             1500\n  total            5000\n  errors 2, oversize 0, size 3000 B, achieved 1666 copies/s (target 2000)\n" +
		"  ack latency ms: p50 0.812  p99 4.100  p99.9 9.000  max 12.500  (n=5000; copy made to acknowledged)\n" +
		"  produce round trip ms: p50 0.300  p99 2.000  p99.9 3.000  max 4.000  (n=40 requests; written to response read)\n" +
		"  prewarm 600 copies under run id w1\n"
	st, err := parseNFSimSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total() != 5000 || st.Sent["SCP"] != 2667 || st.Errors != 2 || st.Elapsed != 3001*time.Millisecond || st.Prewarm != 600 ||
		st.Ack != (nfsim.AckLatency{N: 5000, P50: 0.812, P99: 4.1, P999: 9, Max: 12.5}) ||
		st.ProduceRTT != (nfsim.AckLatency{N: 40, P50: 0.3, P99: 2, P999: 3, Max: 4}) {
		t.Fatalf("parsed %+v", st)
	}
	if _, err := parseNFSimSummary("nfsim: broker down\n"); err == nil {
		t.Fatal("output without summary accepted")
	}
}

func TestDirectorFlags(t *testing.T) {
	bad := [][]string{
		{"-feed", "udp"}, {"-rate", "0"}, {"-size", "10"}, {"-feeds", "0"}, {"-mix", "SCP=x"},
		{"-split-broker", "-brokers", "h:1"}, {"-bin", "/nonexistent/sb"}, {"extra"},
		{"-serve-procs", "-1"}, {"-harness-procs", "-1"}, {"-confirm", "-1"}, {"-confirm", "6"},
	}
	for _, args := range bad {
		if _, err := parseDirectorFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	c, err := parseDirectorFlags(nil, &bytes.Buffer{})
	if err != nil || c.Rate != 30000 || c.Duration != time.Minute || !c.TLS || c.Feed != "synthetic" || c.Size != 3000 ||
		c.ServeProcs != 1 || c.HarnessProcs != 1 || !c.Pin || c.Confirm != 1 {
		t.Fatalf("defaults %+v, %v", c, err)
	}
}
