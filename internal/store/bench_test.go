package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callpolicy"
)

// go test -run '^$' -bench 100k -benchtime 3x ./internal/store/
func BenchmarkReplaceRules100k(b *testing.B) {
	for _, h := range []backendHarness{sqliteHarness(), postgresHarness(b)} {
		b.Run(h.name, func(b *testing.B) {
			s := openT(b, h.fresh(b))
			rules := genRules(100_000)
			// As the API calls it: under the request's cancellable context.
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				if err := s.ReplaceRules(rctx, callpolicy.DefaultPolicyID, rules, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
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
			cpu := cpuTime()
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

// cpuTime is this process's user+system CPU time. On the shared 2-core test
// machine wall time mostly measures the neighbours; CPU time per op does not
// (it leaves out the PostgreSQL server's share).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
}
