// Package app builds the running system from configuration: it opens the
// store, compiles policies, starts the CURRI listener, the director, the API
// and the console, and stops them in order. It also hosts the subcommand
// table of the signalbox binary.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/extcap"
)

// Version is set at build time (-ldflags -X); "dev" otherwise.
var Version = "dev"

// VersionString includes the Go version and VCS revision when known.
func VersionString() string {
	v := Version
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	s := "signalbox " + v
	if rev != "" {
		s += " (" + rev + ")"
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the CURRI call-policy server and the data director", runServe},
		{"nfsim", "simulate 5G NFs copying SBI traffic into Kafka or HTTP/2 ingest", runNFSim},
		{"probe", "a third-party consumer: receive a feed, validate it, measure loss and latency", runProbe},
		{"bench", "end-to-end benchmarks (bench curri, bench director)", runBench},
		{"extcap", "a Wireshark capture interface of live copies (extcap install puts it where Wireshark looks)", runExtcap},
		{"version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) error {
			fmt.Fprintln(stdout, VersionString())
			return nil
		}},
	}
}

// Main runs the subcommand in args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "signalbox — the signalling plane in one binary: CURRI call policy and a 5G data director.\n\nUsage: signalbox <command> [flags]\n\nCommands:\n")
		for _, c := range commands() {
			fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(w, "\nRun 'signalbox <command> -h' for a command's flags.\n")
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if extcap.IsExtcapCall(args) { // Wireshark runs the installed link itself
		args = append([]string{"extcap"}, args...)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "-version", "--version":
		args[0] = "version"
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			if err == nil || err == flag.ErrHelp {
				return 0
			}
			fmt.Fprintf(stderr, "signalbox %s: %v\n", c.name, err)
			if _, ok := err.(usageError); ok {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(stderr, "signalbox: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// usageError is a command-line mistake (exit code 2).
type usageError struct{ error }

func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: signalbox %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}
