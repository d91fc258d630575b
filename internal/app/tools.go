package app

import (
	"context"
	"fmt"
	"io"

	"github.com/signalbox/signalbox/internal/bench"
	"github.com/signalbox/signalbox/internal/datadirector/extcap"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/probe"
)

// defaultNFSimBroker is where nfsim produces without -brokers or -ingest:
// the embedded broker of `signalbox serve` on this host.
const defaultNFSimBroker = "127.0.0.1:9092"

func runNFSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg nfsim.Config
	fs := newFlagSet("nfsim", "Simulates 5G NFs (SCP at 4 trigger points, NRF and SEPP at 2) copying realistic SBI\ntraffic into Kafka (-brokers) or the HTTP/2 ingest (-ingest URL), paced at -rate MPS.", stderr)
	cfg.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(cfg.Brokers) == 0 && cfg.Ingest == "" {
		cfg.Brokers = []string{defaultNFSimBroker} // a default serve's embedded broker
	}
	_, err := nfsim.Run(ctx, cfg, stdout)
	return err
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg probe.Config
	fs := newFlagSet("probe", "A third-party consumer: listens as a synthetic-packet receiver (TCP or TLS) or an HTTP/2\nserver, validates every record and reports received, duplicates, missing and end-to-end latency.", stderr)
	cfg.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, err := probe.Run(ctx, cfg, stdout)
	return err
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" {
		fmt.Fprintf(stderr, "Usage: signalbox bench curri|director [flags]\n")
		if len(args) == 0 {
			return usageError{fmt.Errorf("which benchmark? curri or director")}
		}
		return nil
	}
	switch args[0] {
	case "curri":
		return bench.RunCURRI(ctx, args[1:], stdout, stderr)
	case "director":
		return bench.RunDirector(ctx, args[1:], stdout, stderr)
	}
	return usageError{fmt.Errorf("unknown benchmark %q: want curri or director", args[0])}
}

// runExtcap answers Wireshark's extcap calls, or installs the interface
// (extcap install [-dir DIR]).
func runExtcap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "install" {
		fs := newFlagSet("extcap install", "Links this binary into Wireshark's personal extcap folder as \"signalbox\",\nso that Wireshark and tshark list the signalbox capture interface.", stderr)
		dir := fs.String("dir", "", "the extcap folder (default: the personal folder of the Wireshark installed here)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		how := "-dir"
		if *dir == "" {
			var err error
			if *dir, how, err = extcap.PersonalFolder(); err != nil {
				return err
			}
		}
		path, err := extcap.Install(*dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "installed %s (the personal extcap folder, from %s): restart Wireshark, or run tshark -D, to see the interface %q\n",
			path, how, extcap.Interface)
		return nil
	}
	return extcap.Run(ctx, args, VersionString(), stdout, stderr)
}
