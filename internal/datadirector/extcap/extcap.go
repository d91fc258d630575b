// Package extcap makes signalbox a Wireshark capture interface: Wireshark's
// extcap protocol (its `doc/extcap.adoc`) over the API's live capture,
// GET /api/v1/capture. Wireshark (and tshark, dumpcap) runs the installed
// program with --extcap-interfaces to list its interfaces, --extcap-dlts
// and --extcap-config for an interface's link type and options, and
// --capture --fifo PATH to capture: the program writes a pcap into the FIFO
// until Wireshark stops it (SIGTERM, or closing the FIFO). An error ends the
// capture with a message on stderr and a non-zero exit, which Wireshark
// shows.
package extcap

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// Interface is the one interface signalbox offers.
const Interface = "signalbox"

// Sources are the NF topics offered in the sources option: a default
// serve's (-kafka-topics).
var Sources = []string{"SCP", "NRF", "SEPP", "PCF", "BSF", "NON_ORACLE", "DIAMETER"}

// HelpURL is where the interface's help points.
const HelpURL = "https://github.com/signalbox/signalbox/blob/main/docs/director.md#wireshark-opens-a-live-feed"

// options are the arguments Wireshark passes.
type options struct {
	interfaces, dlts, config, capture bool
	iface, fifo, captureFilter        string
	url, token, sources, filter, supi string
	tokenFile                         string
}

// IsExtcapCall reports whether args are Wireshark calling the program
// itself as an extcap (no subcommand: its first argument is an --extcap-
// or --capture option).
func IsExtcapCall(args []string) bool {
	return len(args) > 0 && (strings.HasPrefix(args[0], "--extcap") || args[0] == "--capture")
}

// Run answers one call of Wireshark's; version is signalbox's. The error
// is Wireshark's to show (the caller writes it to stderr and exits 1).
func Run(ctx context.Context, args []string, version string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("extcap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.interfaces, "extcap-interfaces", false, "list the interfaces (Wireshark)")
	fs.BoolVar(&o.dlts, "extcap-dlts", false, "list the interface's link types (Wireshark)")
	fs.BoolVar(&o.config, "extcap-config", false, "list the interface's options (Wireshark)")
	fs.BoolVar(&o.capture, "capture", false, "capture into --fifo (Wireshark)")
	fs.StringVar(&o.iface, "extcap-interface", "", "the interface (Wireshark): "+Interface)
	fs.StringVar(&o.fifo, "fifo", "", "the FIFO (or file) to write the pcap into (Wireshark)")
	fs.StringVar(&o.captureFilter, "extcap-capture-filter", "", "Wireshark's capture filter, taken as a signalbox filter expression")
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "the signalbox API")
	fs.StringVar(&o.token, "token", "", "an admin or tracer API token (else --token-file, else $SIGNALBOX_TOKEN)")
	fs.StringVar(&o.tokenFile, "token-file", "", "a file holding the API token (Wireshark keeps no password between sessions)")
	fs.StringVar(&o.sources, "sources", "", "NF topics, comma-separated (default: all)")
	fs.StringVar(&o.filter, "filter", "", "a signalbox filter expression")
	fs.StringVar(&o.supi, "supi", "", "only this subscriber's copies")
	// What Wireshark may also pass, unused here.
	fs.String("extcap-version", "", "Wireshark's version")
	fs.String("extcap-control-in", "", "unused: no toolbar controls")
	fs.String("extcap-control-out", "", "unused: no toolbar controls")
	fs.String("extcap-reload-option", "", "unused: no option reloads")
	fs.Bool("debug", false, "unused")
	fs.String("debug-file", "", "unused")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case o.interfaces:
		fmt.Fprintf(stdout, "extcap {version=%s}{help=%s}\n", version, HelpURL)
		fmt.Fprintf(stdout, "interface {value=%s}{display=signalbox live SBI copies}\n", Interface)
		return nil
	case o.iface != Interface:
		return fmt.Errorf("unknown interface %q: signalbox offers %q", o.iface, Interface)
	case o.dlts:
		fmt.Fprintf(stdout, "dlt {number=1}{name=EN10MB}{display=Ethernet (synthetic packets of the NFs' messages)}\n")
		return nil
	case o.config:
		writeConfig(stdout)
		return nil
	case o.capture:
		if err := capture(ctx, o); err != nil {
			endFIFO(o.fifo)
			return err
		}
		return nil
	}
	return errors.New("nothing to do: want --extcap-interfaces, --extcap-dlts, --extcap-config or --capture")
}

// writeConfig lists the interface's options (--extcap-config). Wireshark
// keeps no password between sessions (and tshark reads none from its
// preferences): --token-file is the token a saved configuration keeps.
func writeConfig(w io.Writer) {
	fmt.Fprintf(w, "arg {number=0}{call=--url}{display=API URL}{type=string}{required=true}{default=http://127.0.0.1:8080}"+
		"{tooltip=The signalbox API: http[s]://host:port}\n")
	fmt.Fprintf(w, "arg {number=1}{call=--token}{display=API token}{type=password}"+
		"{tooltip=An admin or tracer token of the API (else the token file, else $SIGNALBOX_TOKEN)}\n")
	fmt.Fprintf(w, "arg {number=2}{call=--token-file}{display=API token file}{type=fileselect}{mustexist=true}"+
		"{tooltip=A file holding the token: a token Wireshark remembers}\n")
	fmt.Fprintf(w, "arg {number=3}{call=--sources}{display=NF topics}{type=multicheck}{tooltip=The NF topics to capture; none checked: all}\n")
	for _, s := range Sources {
		fmt.Fprintf(w, "value {arg=3}{value=%s}{display=%s}{default=false}\n", s, s)
	}
	fmt.Fprintf(w, "arg {number=4}{call=--filter}{display=Filter}{type=string}"+
		"{tooltip=A signalbox filter expression: status >= 400 && service == \"nudm-sdm\"}\n")
	fmt.Fprintf(w, "arg {number=5}{call=--supi}{display=SUPI}{type=string}{validation=^(imsi-)?[0-9]+$}"+
		"{tooltip=Only this subscriber's copies: imsi- and the digits}\n")
}

// capture streams the API's live capture into the FIFO until ctx ends (or
// Wireshark closes the FIFO).
func capture(ctx context.Context, o options) error {
	if o.fifo == "" {
		return errors.New("--capture needs --fifo")
	}
	if o.token == "" && o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("API token file: %w", err)
		}
		o.token = strings.TrimSpace(string(b))
	}
	if o.token == "" {
		o.token = os.Getenv("SIGNALBOX_TOKEN")
	}
	if o.token == "" {
		return errors.New("no API token: set the interface's API token or API token file option (an admin or tracer token), or SIGNALBOX_TOKEN")
	}
	base, err := url.Parse(strings.TrimSpace(o.url))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("API URL %q: want http[s]://host:port", o.url)
	}
	q := url.Values{}
	if o.sources != "" {
		q.Set("sources", o.sources)
	}
	flt := strings.TrimSpace(o.filter)
	if cf := strings.TrimSpace(o.captureFilter); cf != "" {
		if flt != "" {
			flt = "(" + flt + ") && (" + cf + ")"
		} else {
			flt = cf
		}
	}
	if flt != "" {
		q.Set("filter", flt)
	}
	if o.supi != "" {
		q.Set("supi", o.supi)
	}
	u := base.JoinPath("/api/v1/capture")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	cl := &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}}
	resp, err := cl.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it began
		}
		return fmt.Errorf("cannot reach the signalbox API at %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp, o.captureFilter != "")
	}
	fifo, err := os.OpenFile(o.fifo, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the FIFO: %w", err)
	}
	defer fifo.Close()
	go func() { // Wireshark stops a capture with SIGTERM: end the stream
		<-ctx.Done()
		resp.Body.Close()
	}()
	_, err = io.Copy(fifo, resp.Body)
	switch {
	case ctx.Err() != nil, err == nil:
		return nil // stopped, or the server ended the capture
	case errors.Is(err, syscall.EPIPE):
		return nil // Wireshark closed the FIFO
	}
	return fmt.Errorf("the capture stream broke: %w", err)
}

// endFIFO opens the FIFO and closes it at once, so that a capture that
// failed before its stream began ends with an empty stream: Wireshark's
// capture process waits in its open of the FIFO until a writer comes, and
// only then sees the program's exit and shows its error. It gives up after
// 5 s (no reader).
func endFIFO(path string) {
	if path == "" {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// answerError is the API's refusal, said for Wireshark's error dialog.
func answerError(resp *http.Response, captureFilter bool) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the API refused the token (401): %s", msg)
	case resp.StatusCode == http.StatusBadRequest && e.Field == "filter" && captureFilter:
		return fmt.Errorf("the filter was refused: %s. Wireshark's capture filter is taken as a signalbox filter expression "+
			"(field op value, joined with && and ||: status >= 400 && service == \"nudm-sdm\"), not a BPF filter", msg)
	}
	return fmt.Errorf("the API answered %s: %s", resp.Status, msg)
}
