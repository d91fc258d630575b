// Command signalbox is one binary for the signalling plane: the CURRI call
// policy server and the 5G network data director, plus their tools
// (nfsim, probe, bench). Run `signalbox -h` for the subcommands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/signalbox/signalbox/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	endProfile := cpuProfile()
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	endProfile()
	stop()
	os.Exit(code)
}

// cpuProfile profiles the whole process into SIGNALBOX_CPUPROFILE_DIR, when
// set, as COMMAND-PID.prof: for the processes that serve no pprof endpoint
// (nfsim, probe, bench's children), whose CPU counts in a benchmark too.
func cpuProfile() (end func()) {
	dir := os.Getenv("SIGNALBOX_CPUPROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	name := "signalbox"
	if len(os.Args) > 1 {
		name = filepath.Base(os.Args[1])
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.prof", name, os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "signalbox: SIGNALBOX_CPUPROFILE_DIR:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
