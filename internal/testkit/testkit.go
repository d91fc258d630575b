// Package testkit holds what the tests of several packages share: CPU-time
// measurement for benchmarks, waiting on observable state, a discarding
// logger, and the outside tools (PostgreSQL, tshark, kcat, Chromium) that
// `make test` provides. Kafka's part is kafkatest, apart, so that tests
// without Kafka do not link the broker.
//
// It is imported by tests only.
package testkit

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit/outside"
)

// CPUTime is this process's user+system CPU time. Benchmarks report it per
// op beside wall time: on a shared machine wall time also counts the time
// other processes held the cores.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCPU reports the CPU nanoseconds per op since start as cpu-ns/op.
func ReportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op")
}

// WaitFor polls cond every 10 ms until it holds, failing the test after
// timeout with what was awaited.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitForState(t, timeout, what, func() (bool, string) { return cond(), "" })
}

// WaitForState is WaitFor whose condition also describes the state it
// saw, for the failure message.
func WaitForState(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state != "" {
				t.Fatalf("timed out after %s waiting for %s; %s", timeout, what, state)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Logger discards everything.
func Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Outside marks a test that talks to an outside program or server
// (outside.Mark).
func Outside(t testing.TB, what string) {
	t.Helper()
	outside.Mark(t, what)
}

// Long marks a test left out of -short for its time (outside.Long).
func Long(t testing.TB, why string) {
	t.Helper()
	outside.Long(t, why)
}

// Tool returns the path of an outside program a test talks to
// (outside.Tool).
func Tool(t testing.TB, name string) string {
	t.Helper()
	return outside.Tool(t, name)
}

// PostgresDSN is the DSN of the PostgreSQL database make test starts
// (SIGNALBOX_TEST_POSTGRES_DSN; see Outside). Unset, it fails the test.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	Outside(t, "PostgreSQL")
	dsn := os.Getenv("SIGNALBOX_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Fatal("SIGNALBOX_TEST_POSTGRES_DSN unset: run `make test`, which starts PostgreSQL")
	}
	return dsn
}

// BenchSends runs send(batch) b.N times and reports copies/s and the whole
// process's CPU µs per copy (the sink and its loopback consumer): robust
// where wall time is not, on a shared machine.
func BenchSends[T any](b *testing.B, batch []T, send func(context.Context, []T) error) {
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := CPUTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := send(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	copies := float64(b.N * len(batch))
	b.ReportMetric(copies/b.Elapsed().Seconds(), "copies/s")
	b.ReportMetric(float64((CPUTime()-cpu0).Microseconds())/copies, "cpu-µs/copy")
}
