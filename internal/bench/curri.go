package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// curriConfig is the parsed command line of `bench curri`.
type curriConfig struct {
	target      string
	api         string
	token       string
	policy      string
	serverBin   string
	allowRemote bool

	shape RuleShape

	conns       int
	rate        int    // calls/s; 0 = max (closed loop)
	pace        string // open loop: pacePrecise or paceRuntime, resolved
	duration    time.Duration
	warmup      time.Duration
	reloadEvery time.Duration
	reloadWhat  string    // "rules" or "directory"
	directory   int       // entries of the caller-name directory the default action reads (0: none)
	mode        childMode // how the server the bench starts runs
	targetsOut  string    // -vegeta-targets: write the pool as vegeta targets and stop
	changed     float64   // fraction of the directory each reload renames
	timeout     time.Duration
	pool        int
	seed        uint64
	jsonFile    string

	tls            bool   // HTTPS, as CUCM connects to an https:// profile URI
	clientCert     bool   // mutual TLS: present a client certificate
	tlsDir         string // with -target: ca.pem, client.pem, client-key.pem
	reconnectEvery time.Duration
	storm          int // -storm: connections opened at once mid-window
}

const curriUsage = `Usage: signalbox bench curri [flags]

Measures the CURRI call-policy server as Cisco Unified CM uses it: HTTP/1.1
keep-alive connections opened with a HEAD probe, POSTs of XACML requests with
CUCM's exact headers, numbers drawn to hit and miss every rule kind.

Without -target it starts this signalbox binary (or -server-bin) as a child
process on free loopback ports, run as serve runs by default (the director,
its embedded broker, call records into CALLS; -director=false for the CURRI
side alone), loads the rule set
through its API, drives it, reads the server's own CPU and memory from its
/metrics, and stops it. With -target it drives a running server; with -api
and -token as well it loads the rule set into -policy first (REPLACING that
policy's rules and adding list entries) and reads the server's /metrics.

Latency is measured from each call's intended send time in the open-loop
schedule (-rate N), so a stalled server cannot hide queueing. -rate max runs
closed loop: every connection sends as fast as it gets answers.

Load goes to loopback only unless -allow-remote. Flags:
`

func parseCURRIFlags(args []string, stderr io.Writer) (curriConfig, error) {
	var c curriConfig
	fs := flag.NewFlagSet("bench curri", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, curriUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.target, "target", "", "CURRI URL of a running server, e.g. http://127.0.0.1:4080/curri/default (default: start a server)")
	fs.StringVar(&c.api, "api", "", "with -target: base URL of that server's REST API and /metrics, e.g. http://127.0.0.1:8080, to load rules and read its CPU/RSS")
	fs.StringVar(&c.token, "token", "", "with -api: admin bearer token of the REST API")
	fs.StringVar(&c.policy, "policy", "default", "policy to load the rules into and to call (default: the one named by a -target of /curri/{policy}, else default)")
	fs.StringVar(&c.serverBin, "server-bin", "", "signalbox binary to start as the server (default: this executable)")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow a -target/-api that is not on loopback")
	rules := fs.Int("rules", 1000, "rule count, shaped like the reference test: 80% exact (calling number), 20% regex (called number)")
	fs.IntVar(&c.shape.Exact, "exact", 0, "exact calling-number rules (any of -exact/-prefix/-pattern/-regex overrides -rules)")
	fs.IntVar(&c.shape.Prefix, "prefix", 0, "prefix rules on the called number, e.g. prefix:+1600200")
	fs.IntVar(&c.shape.Pattern, "pattern", 0, "CUCM route-pattern rules on the called number, e.g. pattern:9.1200[2-9]XXXXXX")
	fs.IntVar(&c.shape.Regex, "regex", 0, `dial-plan regex rules on the called number, e.g. regex:^\+?1?8(00|88|77|66|55|44|33)200\d{4}$`)
	fs.IntVar(&c.shape.Allow, "allow", 100, "allow-list entries (calling numbers)")
	fs.IntVar(&c.shape.Block, "block", 100, "block-list entries (calling numbers)")
	fs.IntVar(&c.conns, "conns", 32, "keep-alive connections, as CUCM nodes hold them")
	rate := fs.String("rate", "1000", "calls per second on an open-loop schedule, or 'max' for closed loop")
	pace := fs.String("pace", paceAuto, fmt.Sprintf("how the open loop waits for a call's due time: precise (a timerfd per connection, Linux), runtime (Go timers: cheaper, but up to ~1 ms late when the generator is idle) or auto (precise below %d calls/s)", paceAutoRate))
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", 5*time.Second, "load before the measured window, excluded from the stats")
	fs.DurationVar(&c.reloadEvery, "reload-every", 0, "replace the whole rule set through the API this often during the run, and report each swap beside a control window of the same length without one (0 = never)")
	fs.StringVar(&c.reloadWhat, "reload", "rules", "what -reload-every replaces: rules (the whole rule set) or directory (the caller-name directory of -directory, as a CSV import)")
	fs.IntVar(&c.directory, "directory", 0, "load a caller-name directory of this many exact numbers (and 1% as many prefixes) and have the policy's default action name callers from it; 90% of the calls no rule decides come from a number in it")
	fs.BoolVar(&c.mode.director, "director", true, "start the server as serve runs by default: with the director, its embedded broker and the HTTP/2 ingest (what a new user's server runs); -director=false: the CURRI side alone")
	fs.BoolVar(&c.mode.calls, "calls-stream", true, "the server started produces every decision into CALLS as a call record, as serve does by default; the report counts the records produced and dropped; -calls-stream=false: -calls-topic ''")
	fs.StringVar(&c.mode.callsKafka, "calls-kafka", "", "produce the call records into this Kafka cluster (host:port,...) instead of the server's embedded broker, so that the server's CPU is the producer's alone")
	fs.StringVar(&c.targetsOut, "vegeta-targets", "", "write the calls of the pool to this file as vegeta JSON targets (vegeta attack -format json), load the rule set if the bench has an API, and stop without driving: the same calls for an independent load generator")
	fs.Float64Var(&c.changed, "changed", 1, "the fraction of the rules (-reload rules) or directory entries (-reload directory) each reload changes; the rest are sent as before")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "per-call timeout; a call without an answer by then is a transport error")
	fs.IntVar(&c.pool, "pool", 4096, "distinct pre-rendered requests, cycled")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the number draws")
	fs.StringVar(&c.jsonFile, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&c.tls, "tls", false, "HTTPS, as CUCM connects when the ECC profile's URI is https://: without -target the bench makes a throwaway CA and server certificate and starts the server with them (implied by an https:// -target)")
	fs.BoolVar(&c.clientCert, "client-cert", false, "mutual TLS: present a client certificate, as CUCM does to a route server that asks; without -target the server started requires it (-curri-client-ca)")
	fs.StringVar(&c.tlsDir, "tls-dir", "", "with an https:// -target: directory holding ca.pem (trusted for the server) and, for -client-cert, client.pem and client-key.pem — the files the bench writes for the server it starts")
	fs.DurationVar(&c.reconnectEvery, "reconnect-every", 0, "close and reopen each connection this often (staggered), as a CUCM node restarting or failing back does: a new TCP connection, TLS handshake and HEAD probe (0 = never)")
	fs.IntVar(&c.storm, "storm", 0, "halfway through the measured window, open this many more connections at once (TCP, TLS handshake, HEAD probe, then close), as CUCM nodes failing back together do, and report how long they took; the calls on the connections already up are measured as ever")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("bench curri: unexpected argument %q", fs.Arg(0))
	}
	explicit, policySet, callsSet := false, false, false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "exact", "prefix", "pattern", "regex":
			explicit = true
		case "policy":
			policySet = true
		case "calls-stream":
			callsSet = true
		}
	})
	if !c.mode.director {
		if callsSet && c.mode.calls {
			return c, errors.New("bench curri: -calls-stream needs the director's Kafka: drop -director=false")
		}
		c.mode.calls = false
	}
	if !explicit {
		if *rules < 0 {
			return c, fmt.Errorf("bench curri: -rules %d: must be >= 0", *rules)
		}
		c.shape.Regex = *rules / 5
		c.shape.Exact = *rules - c.shape.Regex
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"exact", c.shape.Exact}, {"prefix", c.shape.Prefix}, {"pattern", c.shape.Pattern}, {"regex", c.shape.Regex}, {"allow", c.shape.Allow}, {"block", c.shape.Block}} {
		if v.n < 0 || v.n > 10_000_000 {
			return c, fmt.Errorf("bench curri: -%s %d: must be between 0 and 10000000", v.name, v.n)
		}
	}
	if *rate == "max" {
		c.rate = 0
	} else {
		n, err := strconv.Atoi(*rate)
		if err != nil || n <= 0 || n > 10_000_000 {
			return c, fmt.Errorf("bench curri: -rate %q: want a number of calls per second (1..10000000) or 'max'", *rate)
		}
		c.rate = n
	}
	// Checked with -rate max too, where no pacer runs (c.pace stays "").
	p, err := resolvePace(*pace, c.rate)
	if err != nil {
		return c, fmt.Errorf("bench curri: %w", err)
	}
	if c.rate > 0 {
		c.pace = p
	}
	switch {
	case c.conns < 1 || c.conns > 10000:
		return c, fmt.Errorf("bench curri: -conns %d: must be between 1 and 10000", c.conns)
	case c.duration <= 0:
		return c, fmt.Errorf("bench curri: -duration %v: must be positive", c.duration)
	case c.warmup < 0:
		return c, fmt.Errorf("bench curri: -warmup %v: must not be negative", c.warmup)
	case c.reloadEvery < 0 || (c.reloadEvery > 0 && c.reloadEvery < 500*time.Millisecond):
		return c, fmt.Errorf("bench curri: -reload-every %v: must be 0 (off) or at least 500ms", c.reloadEvery)
	case c.timeout <= 0:
		return c, fmt.Errorf("bench curri: -timeout %v: must be positive", c.timeout)
	case c.reloadWhat != "rules" && c.reloadWhat != "directory":
		return c, fmt.Errorf("bench curri: -reload %q: want rules or directory", c.reloadWhat)
	case c.reloadWhat == "directory" && c.directory == 0:
		return c, errors.New("bench curri: -reload directory needs -directory N")
	case c.directory < 0 || c.directory > 2_000_000:
		return c, fmt.Errorf("bench curri: -directory %d: must be between 0 and 2000000", c.directory)
	case c.changed < 0 || c.changed > 1:
		return c, fmt.Errorf("bench curri: -changed %v: must be a fraction from 0 to 1", c.changed)
	case c.pool < 1 || c.pool > 1_000_000:
		return c, fmt.Errorf("bench curri: -pool %d: must be between 1 and 1000000", c.pool)
	case c.policy == "" || strings.ContainsAny(c.policy, "/?#"):
		return c, fmt.Errorf("bench curri: -policy %q: not a policy id", c.policy)
	case c.storm < 0 || c.storm > 5000:
		return c, fmt.Errorf("bench curri: -storm %d: must be between 0 and 5000", c.storm)
	case c.reconnectEvery < 0 || (c.reconnectEvery > 0 && c.reconnectEvery < 100*time.Millisecond):
		return c, fmt.Errorf("bench curri: -reconnect-every %v: must be 0 (never) or at least 100ms", c.reconnectEvery)
	}
	if strings.HasPrefix(c.target, "https://") {
		c.tls = true
	}
	if c.clientCert && !c.tls {
		return c, errors.New("bench curri: -client-cert needs -tls")
	}
	if c.mode.callsKafka != "" && (!c.mode.calls || !c.mode.director || c.target != "") {
		return c, errors.New("bench curri: -calls-kafka goes with -calls-stream, on the server the bench starts (no -target, no -director=false)")
	}
	if c.targetsOut != "" && c.target == "" {
		return c, errors.New("bench curri: -vegeta-targets goes with -target: the targets name a server that stays up")
	}
	if c.target == "" && c.tlsDir != "" {
		return c, errors.New("bench curri: -tls-dir goes with an https:// -target; without -target the bench writes its own")
	}
	if c.target != "" && c.tls && c.tlsDir == "" {
		return c, errors.New("bench curri: an https:// -target needs -tls-dir (ca.pem, and client.pem/client-key.pem for -client-cert)")
	}
	if c.target == "" {
		if c.api != "" || c.token != "" {
			return c, errors.New("bench curri: -api and -token go with -target; without -target the bench starts its own server")
		}
	} else {
		if err := checkURL("-target", c.target, c.allowRemote); err != nil {
			return c, err
		}
		// A signalbox CURRI URL names its policy: /curri/{policy}.
		if u, _ := url.Parse(c.target); !policySet {
			if rest, ok := strings.CutPrefix(u.Path, "/curri/"); ok && rest != "" && !strings.Contains(rest, "/") {
				c.policy = rest
			}
		}
		if c.api != "" {
			if err := checkURL("-api", c.api, c.allowRemote); err != nil {
				return c, err
			}
		}
		if c.reloadEvery > 0 && c.api == "" {
			return c, errors.New("bench curri: -reload-every needs -api (and -token) with -target")
		}
	}
	return c, nil
}

// checkURL accepts an http URL on loopback (or anywhere with allowRemote).
func checkURL(flagName, raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bench curri: %s %q: %w", flagName, raw, err)
	}
	if u.Scheme != "http" && (u.Scheme != "https" || flagName != "-target") {
		return fmt.Errorf("bench curri: %s %q: want an http:// URL (https:// for -target)", flagName, raw)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("bench curri: %s %q: no host", flagName, raw)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("bench curri: %s %q: not a loopback address; load goes to loopback only unless -allow-remote", flagName, raw)
}

// lockedWriter serializes writes from the bench and the child's output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// RunCURRI runs `signalbox bench curri`: see curriUsage, or -h.
func RunCURRI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	cfg, err := parseCURRIFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	rep := &curriReport{
		Conns:     cfg.conns,
		Rate:      cfg.rate,
		Pace:      cfg.pace,
		DurationS: cfg.duration.Seconds(),
		WarmupS:   cfg.warmup.Seconds(),
		Pool:      cfg.pool,
	}
	if cfg.tls {
		rep.TLS = "TLS, server certificate verified"
		if cfg.clientCert {
			rep.TLS = "mutual TLS (client certificate presented)"
		}
	}
	targetHost, targetPath := "", ""
	var api *apiClient
	var tlsConf *tls.Config
	if cfg.target == "" {
		fmt.Fprintln(stderr, "bench curri: starting the server")
		var tlsOpt *childTLS
		if cfg.tls {
			dir, err := os.MkdirTemp("", "signalbox-bench-tls-*")
			if err != nil {
				return fmt.Errorf("bench curri: %w", err)
			}
			defer os.RemoveAll(dir)
			if err := writeTLSFiles(dir); err != nil {
				return fmt.Errorf("bench curri: make certificates: %w", err)
			}
			tlsOpt = &childTLS{dir: dir, requireClientCert: cfg.clientCert}
			if tlsConf, err = clientTLSConfig(dir, "127.0.0.1", cfg.clientCert); err != nil {
				return fmt.Errorf("bench curri: %w", err)
			}
		}
		ch, err := startChild(ctx, cfg.serverBin, stderr, tlsOpt, cfg.mode)
		if err != nil {
			return fmt.Errorf("bench curri: %w", err)
		}
		defer ch.stop()
		targetHost, targetPath = ch.curri, "/curri/"+url.PathEscape(cfg.policy)
		scheme := "http://"
		if cfg.tls {
			scheme = "https://"
		}
		cfg.target = scheme + targetHost + targetPath
		api = newAPIClient(ch.api, ch.token, cfg.policy)
		rep.ServerRun = cfg.mode.String()
	} else {
		u, _ := url.Parse(cfg.target)
		targetHost, targetPath = u.Host, u.EscapedPath()
		if u.Port() == "" {
			port := "80"
			if cfg.tls {
				port = "443"
			}
			targetHost = net.JoinHostPort(u.Hostname(), port)
		}
		if cfg.tls {
			var err error
			if tlsConf, err = clientTLSConfig(cfg.tlsDir, u.Hostname(), cfg.clientCert); err != nil {
				return fmt.Errorf("bench curri: %w", err)
			}
		}
		if u.RawQuery != "" {
			targetPath += "?" + u.RawQuery
		}
		if targetPath == "" {
			targetPath = "/"
		}
		if cfg.api != "" {
			api = newAPIClient(cfg.api, cfg.token, cfg.policy)
		}
	}

	rep.Target = cfg.target
	rep.ReconnectEveryS = cfg.reconnectEvery.Seconds()
	rep.Mode = "open-loop"
	if cfg.rate == 0 {
		rep.Mode = "closed-loop"
	}
	if api != nil {
		rep.Shape = &cfg.shape
		fmt.Fprintf(stderr, "bench curri: loading %s\n", cfg.shape)
		ld, err := loadRuleSet(ctx, api, cfg.shape)
		if err != nil {
			return fmt.Errorf("bench curri: load the rule set: %w", err)
		}
		if cfg.directory > 0 {
			fmt.Fprintf(stderr, "bench curri: loading a directory of %d entries\n", cfg.directory+cfg.directory/100)
			if ld.DirectoryPutMs, ld.DirectoryLiveMs, err = loadDirectory(ctx, api, cfg.directory); err != nil {
				return fmt.Errorf("bench curri: load the directory: %w", err)
			}
			rep.Directory = cfg.directory + cfg.directory/100
		}
		rep.Load = ld
	}

	r := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	calls := drawCalls(cfg.shape, cfg.pool, r, cfg.directory)
	pool := make([]pooled, len(calls))
	for i, c := range calls {
		pool[i] = pooled{class: c.class, req: renderRequest(targetHost, targetPath, c)}
	}

	if cfg.targetsOut != "" {
		if err := writeVegetaTargets(cfg.targetsOut, cfg.target, calls); err != nil {
			return fmt.Errorf("bench curri: %w", err)
		}
		fmt.Fprintf(stderr, "bench curri: wrote %d vegeta targets to %s\n", len(calls), cfg.targetsOut)
		return nil
	}
	res, err := drive(ctx, driveConfig{
		addr:        targetHost,
		tls:         tlsConf,
		reconnect:   cfg.reconnectEvery,
		storm:       cfg.storm,
		head:        renderHead(targetHost, targetPath),
		pool:        pool,
		conns:       cfg.conns,
		rate:        cfg.rate,
		pace:        cfg.pace,
		warmup:      cfg.warmup,
		duration:    cfg.duration,
		timeout:     cfg.timeout,
		reloadEvery: cfg.reloadEvery,
		reloadWhat:  cfg.reloadWhat,
		directory:   cfg.directory,
		changed:     cfg.changed,
		shape:       cfg.shape,
		api:         api,
		log:         stderr,
	})
	if err != nil {
		return fmt.Errorf("bench curri: %w", err)
	}
	rep.fill(res)
	if err := rep.writeTable(stdout); err != nil {
		return err
	}
	if cfg.jsonFile != "" {
		if err := rep.writeJSONFile(cfg.jsonFile); err != nil {
			return fmt.Errorf("bench curri: %w", err)
		}
	}
	return nil
}

// loadRuleSet adds the list entries, bulk-loads rule set generation 0 and
// times how long until it answers calls. The lists go first so that once
// the canary rule is live, everything is.
func loadRuleSet(ctx context.Context, api *apiClient, shape RuleShape) (*loadResult, error) {
	t0 := time.Now()
	if err := api.addEntries(ctx, "block", buildEntries(shape.Block, blockNumber, "bench")); err != nil {
		return nil, err
	}
	if err := api.addEntries(ctx, "allow", buildEntries(shape.Allow, allowNumber, "bench")); err != nil {
		return nil, err
	}
	lists := time.Since(t0)
	t1 := time.Now()
	if err := api.replaceRules(ctx, buildRules(shape, 0)); err != nil {
		return nil, err
	}
	put := time.Since(t1)
	if err := api.waitLive(ctx, 0, 60*time.Second); err != nil {
		return nil, err
	}
	return &loadResult{ListsPostMs: ms(lists), RulesPutMs: ms(put), RulesLiveMs: ms(time.Since(t1)), TotalMs: ms(time.Since(t0))}, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
