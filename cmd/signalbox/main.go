// Command signalbox is one binary for the signalling plane: the CURRI call
// policy server and the 5G network data director, plus their tools
// (nfsim, probe, bench). Run `signalbox -h` for the subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/signalbox/signalbox/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
