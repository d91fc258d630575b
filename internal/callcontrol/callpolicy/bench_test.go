package callpolicy

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit"
)

// dialRegex returns dial-plan regexes in the style of Call Telemetry's
// examples (^1?8(00|88|77|66|55|44|33)\d{7}$), distinct per i.
func dialRegex(i int) string {
	switch i % 4 {
	case 0:
		return fmt.Sprintf(`^\+?1?8(00|88|77|66|55|44|33)%03d\d{4}$`, i)
	case 1:
		return fmt.Sprintf(`^\+?1?%03d[2-9]\d{6}$`, i)
	case 2:
		return fmt.Sprintf(`^(00|\+)44%03d\d{4,6}$`, i)
	}
	return fmt.Sprintf(`^9011%03d.*7$`, i)
}

func benchPolicy(nExact, nPrefix, nRegex int) PolicyConfig {
	cfg := PolicyConfig{Policy: Policy{ID: "p", DefaultAction: permit()}}
	cfg.Rules = make([]Rule, 0, nExact+nPrefix+nRegex)
	id := int64(0)
	add := func(m Match) {
		id++
		cfg.Rules = append(cfg.Rules, Rule{ID: id, Priority: int(id), Enabled: true, Match: m, Action: deny()})
	}
	for i := 0; i < nExact; i++ {
		n := fmt.Sprintf("+1%010d", 2000000000+i*7919)
		if i%2 == 0 {
			add(Match{Calling: n})
		} else {
			add(Match{Called: n})
		}
	}
	for i := 0; i < nPrefix; i++ {
		if i%2 == 0 {
			add(Match{Called: fmt.Sprintf("prefix:1%06d", i)})
		} else {
			add(Match{Called: fmt.Sprintf("pattern:9.1%03d[2-9]XXXXXX", i%1000), TriggerPoint: "originating"})
		}
	}
	for i := 0; i < nRegex; i++ {
		if i%2 == 0 {
			add(Match{Called: "regex:" + dialRegex(i)})
		} else {
			add(Match{Calling: "regex:" + dialRegex(i)})
		}
	}
	return cfg
}

// benchCalls mixes calls that hit an exact rule, a prefix or pattern, a
// regex, and nothing (default: every index is consulted).
func benchCalls() []Call {
	rng := rand.New(rand.NewPCG(7, 7))
	var calls []Call
	for i := 0; i < 256; i++ {
		num := fmt.Sprintf("+1%010d", rng.Int64N(9000000000)+1000000000)
		c := Call{Calling: num, Called: fmt.Sprintf("%011d", rng.Int64N(1e11)), TransformedCalling: num, TransformedCalled: "9" + num[1:],
			TriggerPoint: "ORIGINATING", DeviceName: "SEP001122334455"}
		switch i % 4 {
		case 0:
			c.Calling = fmt.Sprintf("+1%010d", 2000000000+rng.IntN(800)*7919)
		case 1:
			c.Called = fmt.Sprintf("91%03d5%06d", rng.IntN(1000), rng.IntN(1e6))
		case 2:
			c.Called = fmt.Sprintf("1888%03d%04d", rng.IntN(200)/4*4, rng.IntN(1e4))
		}
		calls = append(calls, c)
	}
	return calls
}

func benchEvaluate(b *testing.B, cfg PolicyConfig) {
	e := mustEngine(b, cfg)
	calls := benchCalls()
	steps := map[Step]int{}
	for i := range calls {
		d, _ := e.DryRun("p", &calls[i], t0)
		steps[d.Step]++
	}
	b.Logf("%d rules; decisions over the call mix: %v", len(cfg.Rules), steps)
	// Collect the set-up garbage now, not in the background of the loop.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testkit.CPUTime()
	for i := 0; i < b.N; i++ {
		e.Evaluate("p", &calls[i%len(calls)], t0)
	}
	testkit.ReportCPU(b, cpu)
}

func BenchmarkEvaluate1kRules(b *testing.B) { benchEvaluate(b, benchPolicy(800, 0, 200)) }

func BenchmarkEvaluate100kRules(b *testing.B) { benchEvaluate(b, benchPolicy(90000, 9000, 1000)) }

func BenchmarkCompile100k(b *testing.B) {
	cfg := benchPolicy(90000, 9000, 1000)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := testkit.CPUTime()
	for i := 0; i < b.N; i++ {
		if _, err := Compile([]PolicyConfig{cfg}); err != nil {
			b.Fatal(err)
		}
	}
	testkit.ReportCPU(b, cpu)
}

// BenchmarkCompileBesideCalls compiles a 100k-rule policy on every P while
// a goroutine standing in for a CURRI call wakes every 0.5 ms, and reports
// how late those wake-ups run: bulk work must yield to calls (DESIGN.md,
// Conventions), or a call waits for the compile's 10 ms preemption slice.
//
//	go test -run '^$' -bench CompileBesideCalls -benchtime 3x ./internal/callcontrol/callpolicy/
func BenchmarkCompileBesideCalls(b *testing.B) {
	cfg := benchPolicy(90000, 9000, 1000)
	stop := make(chan struct{})
	lat := make(chan []time.Duration)
	go func() {
		var ds []time.Duration
		for {
			select {
			case <-stop:
				lat <- ds
				return
			default:
			}
			due := time.Now().Add(500 * time.Microsecond)
			time.Sleep(500 * time.Microsecond)
			ds = append(ds, time.Since(due))
		}
	}()
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				if _, err := Compile([]PolicyConfig{cfg}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	close(stop)
	ds := <-lat
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "wake-p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "wake-p99-µs")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds()), "wake-max-µs")
}
