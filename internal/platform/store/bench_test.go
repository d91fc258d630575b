package store

import (
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
	"github.com/signalbox/signalbox/internal/testkit"
)

// go test -run '^$' -bench 100k -benchtime 3x ./internal/platform/store/
func BenchmarkReplaceRules100k(b *testing.B) {
	for _, h := range []backendHarness{sqliteHarness(), postgresHarness(b)} {
		b.Run(h.name, func(b *testing.B) {
			outside0 := outsideGo()
			s := openT(b, h.fresh(b))
			rules := genRules(100_000)
			// As the API calls it: under the request's cancellable context.
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			b.ResetTimer()
			cpu := testkit.CPUTime()
			for range b.N {
				if err := s.ReplaceRules(rctx, callpolicy.DefaultPolicyID, rules, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			if h.name == "sqlite" {
				b.ReportMetric(float64(outsideGo()-outside0)/(1<<20), "outside-go-MB")
			}
		})
	}
}

func BenchmarkLoadPolicies100k(b *testing.B) {
	for _, h := range []backendHarness{sqliteHarness(), postgresHarness(b)} {
		b.Run(h.name, func(b *testing.B) {
			s := openT(b, h.fresh(b))
			if err := s.ReplaceRules(ctx, callpolicy.DefaultPolicyID, genRules(100_000), nil); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu := testkit.CPUTime()
			defer reportCPU(b, cpu)
			for range b.N {
				pcs, err := s.LoadPolicies(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(pcs[0].Rules) != 100_000 {
					b.Fatalf("%d rules", len(pcs[0].Rules))
				}
			}
		})
	}
}

func BenchmarkInsertCalls1000(b *testing.B) {
	for _, h := range []backendHarness{sqliteHarness(), postgresHarness(b)} {
		b.Run(h.name, func(b *testing.B) {
			s := openT(b, h.fresh(b))
			calls := make([]CallRecord, 1000)
			for i := range calls {
				calls[i] = CallRecord{Calling: "+4930123456", Called: "+4940987654", Decision: "permit", Step: "rule", Policy: "default", Client: "10.1.2.3"}
			}
			b.ResetTimer()
			for range b.N {
				if err := s.InsertCalls(ctx, calls); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(calls)), "ns/call")
		})
	}
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((testkit.CPUTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// outsideGo is this process's resident memory that the Go runtime did not
// map: for the SQLite backend mostly SQLite's own heap (page caches, the
// sorter), which counts in the server's RSS but not in its Go heap.
func outsideGo() int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var rss int64
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	ms := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(ms)
	return rss - int64(ms[0].Value.Uint64()-ms[1].Value.Uint64())
}
