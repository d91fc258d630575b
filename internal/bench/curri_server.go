package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/signalbox/signalbox/internal/platform/config"
)

// child is a signalbox server the bench started as its own process, so that
// the server's CPU and memory are its own and not the load generator's.
type child struct {
	cmd     *exec.Cmd
	dataDir string
	done    chan error
	api     string // http://127.0.0.1:port
	curri   string // 127.0.0.1:port
	token   string
}

// childTLS serves the child's CURRI over HTTPS with the certificates of a
// -tls-dir (writeTLSFiles), requiring client certificates if asked.
type childTLS struct {
	dir               string
	requireClientCert bool
}

// childMode is how the server the bench starts is run.
type childMode struct {
	// director: as `serve` runs by default, with the director, its
	// embedded broker and the HTTP/2 ingest (on free ports); false: the
	// CURRI side alone (serve -director=false).
	director bool
	// calls: every decision is produced into CALLS (needs director or
	// callsKafka).
	calls bool
	// callsKafka: an external cluster carries the call records instead of
	// the embedded broker, so the server is a Kafka client only.
	callsKafka string
}

// String names the mode as the report shows it.
func (m childMode) String() string {
	switch {
	case m.callsKafka != "":
		return "serve with -kafka-brokers " + m.callsKafka + " (no embedded broker), call records into CALLS there"
	case m.director && m.calls:
		return "serve as by default: director with its embedded broker, HTTP/2 ingest, call records into CALLS"
	case m.director:
		return "serve with the director and its embedded broker, no call records (-calls-topic '')"
	}
	return "serve -director=false: the CURRI side alone"
}

// startChild runs `bin serve` on loopback ports of the kernel's choice
// (read from its listeners file) with a random admin
// token and waits until /readyz answers 200.
func startChild(ctx context.Context, bin string, logOut io.Writer, tlsOpt *childTLS, mode childMode) (*child, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the signalbox binary: %w (use -server-bin)", err)
		}
		bin = exe
	}
	dir, err := os.MkdirTemp("", "signalbox-bench-*")
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	c := &child{
		dataDir: dir,
		done:    make(chan error, 1),
		token:   hex.EncodeToString(tok[:]),
	}
	c.cmd = exec.Command(bin, "serve",
		"-data-dir", dir,
		"-http-addr", "127.0.0.1:0",
		"-curri-addr", "127.0.0.1:0",
		"-admin-token", c.token,
		"-log-level", "warn")
	calls := "CALLS"
	if !mode.calls {
		calls = ""
	}
	switch {
	case mode.callsKafka != "":
		c.cmd.Args = append(c.cmd.Args, "-kafka-brokers", mode.callsKafka, "-ingest-addr", "", "-calls-topic", calls)
	case mode.director:
		c.cmd.Args = append(c.cmd.Args, "-kafka-addr", "127.0.0.1:0", "-ingest-addr", "127.0.0.1:0", "-calls-topic", calls)
	default:
		c.cmd.Args = append(c.cmd.Args, "-director=false")
	}
	if tlsOpt != nil {
		c.cmd.Args = append(c.cmd.Args,
			"-curri-tls-cert", filepath.Join(tlsOpt.dir, tlsServerCertFile),
			"-curri-tls-key", filepath.Join(tlsOpt.dir, tlsServerKeyFile))
		if tlsOpt.requireClientCert {
			c.cmd.Args = append(c.cmd.Args, "-curri-client-ca", filepath.Join(tlsOpt.dir, tlsCAFile))
		}
	}
	c.cmd.Stdout = logOut
	c.cmd.Stderr = logOut
	dieWithBench(c.cmd)
	if err := c.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { c.done <- c.cmd.Wait(); close(exited) }()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	ls, err := config.WaitListeners(wctx, dir, c.cmd.Process.Pid, exited)
	cancel()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("server %s: %w", bin, err)
	}
	c.api, c.curri = "http://"+ls.HTTP, ls.CURRI

	deadline := time.Now().Add(60 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.api+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case err := <-c.done:
			c.done <- err
			c.stop()
			return nil, fmt.Errorf("server %s exited before it was ready: %v", bin, err)
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("server %s not ready within 60s (last: %v)", bin, err)
		}
	}
}

// stop asks the server to shut down (SIGTERM), kills it if it has not
// exited within 10s, and removes its data directory.
func (c *child) stop() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	_ = os.RemoveAll(c.dataDir)
}

// apiClient talks to the REST API to load rules and to the /metrics page.
type apiClient struct {
	base   string // http://host:port
	token  string
	policy string
	hc     *http.Client
}

func newAPIClient(base, token, policy string) *apiClient {
	return &apiClient{base: strings.TrimRight(base, "/"), token: token, policy: policy,
		hc: &http.Client{Timeout: 60 * time.Second}}
}

func (a *apiClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	contentType := "application/json"
	if raw, ok := body.(json.RawMessage); ok {
		rd = bytes.NewReader(raw)
	} else if csv, ok := body.(csvBody); ok {
		rd, contentType = bytes.NewReader(csv), "text/csv"
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &apiStatusError{method: method, path: path, status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode reply: %w", method, path, err)
		}
	}
	return nil
}

// csvBody is a request body sent as text/csv.
type csvBody []byte

type apiStatusError struct {
	method, path string
	status       int
	body         string
}

func (e *apiStatusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, clip([]byte(e.body)))
}

func (a *apiClient) policyPath() string { return "/api/v1/policies/" + url.PathEscape(a.policy) }

// replaceRules is the bulk load: the whole rule set in one PUT.
func (a *apiClient) replaceRules(ctx context.Context, rules []ruleJSON) error {
	return a.do(ctx, http.MethodPut, a.policyPath()+"/rules", rules, nil)
}

// replaceRulesJSON is replaceRules with the body already rendered.
func (a *apiClient) replaceRulesJSON(ctx context.Context, body []byte) error {
	return a.do(ctx, http.MethodPut, a.policyPath()+"/rules", json.RawMessage(body), nil)
}

func (a *apiClient) addEntries(ctx context.Context, list string, entries []entryJSON) error {
	if len(entries) == 0 {
		return nil
	}
	return a.do(ctx, http.MethodPost, a.policyPath()+"/lists/"+list+"/entries", entries, nil)
}

// evaluate dry-runs a call and returns the decision ("permit", "deny", ...).
// A 503 (policy not compiled yet) is reported as "" without error.
func (a *apiClient) evaluate(ctx context.Context, calling, called string) (string, error) {
	var out struct {
		Decision struct {
			Action struct {
				Decision string `json:"decision"`
			} `json:"action"`
		} `json:"decision"`
	}
	err := a.do(ctx, http.MethodPost, a.policyPath()+"/evaluate", map[string]string{"calling": calling, "called": called}, &out)
	var se *apiStatusError
	if errors.As(err, &se) && se.status == http.StatusServiceUnavailable {
		return "", nil
	}
	return out.Decision.Action.Decision, err
}

// waitLive polls the dry run until the canary of generation gen is denied,
// i.e. until that rule set is the live one.
func (a *apiClient) waitLive(parent context.Context, gen int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	for {
		d, err := a.evaluate(ctx, canaryNumber(gen), "50000")
		if parent.Err() != nil {
			return fmt.Errorf("the run ended before rule set %d was seen live", gen)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("rule set %d not live within %v: %w", gen, limit, err)
			}
			return fmt.Errorf("check rule set %d is live: %w", gen, err)
		}
		if d == "deny" {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("the run ended before rule set %d was seen live", gen)
			}
			return fmt.Errorf("rule set %d not live within %v (canary %s decided %q)", gen, limit, canaryNumber(gen), d)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// durationBucket is the server's own histogram of CURRI request time, from
// the first byte of a request read to the response written.
const durationBucket = "signalbox_curri_request_duration_seconds_bucket"

// bucket is one cumulative histogram bucket: n observations <= le seconds.
type bucket struct{ le, n float64 }

// bucketQuantile returns the upper bound of the bucket holding quantile q
// of the observations made between two scrapes (cumulative buckets, same
// bounds), or -1 if there were none. +Inf is returned as such.
func bucketQuantile(first, last []bucket, q float64) float64 {
	if len(first) != len(last) || len(last) == 0 {
		return -1
	}
	total := last[len(last)-1].n - first[len(first)-1].n
	if total <= 0 {
		return -1
	}
	for i := range last {
		if last[i].n-first[i].n >= q*total {
			return last[i].le
		}
	}
	return last[len(last)-1].le
}

// bucketOver returns how many observations made between two scrapes were
// above le seconds, which must be a bucket bound; -1 if it is not one or
// the scrapes do not match.
func bucketOver(first, last []bucket, le float64) int64 {
	if len(first) != len(last) || len(last) == 0 {
		return -1
	}
	for i := range last {
		if last[i].le == le {
			total := last[len(last)-1].n - first[len(first)-1].n
			return int64(total - (last[i].n - first[i].n))
		}
	}
	return -1
}

// procStats is the server's process collector as seen on /metrics.
type procStats struct {
	cpuSeconds float64
	rssBytes   float64
	// calls stream counters (signalbox_calls_stream_*_total), -1 if absent
	callsProduced, callsDropped, callsFailed float64
	buckets                                  []bucket // durationBucket, in exposition order (ascending le)
}

// scrapeBy scrapes within 5 s even when ctx has ended: a run's last
// figures are read as it stops.
func (a *apiClient) scrapeBy(ctx context.Context) (procStats, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return a.scrapeProc(sctx)
}

// scrapeProc reads process_cpu_seconds_total and
// process_resident_memory_bytes from a Prometheus text page.
func (a *apiClient) scrapeProc(ctx context.Context) (procStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	if err != nil {
		return procStats{}, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return procStats{}, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return procStats{}, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	return parseProcMetrics(resp.Body)
}

func parseProcMetrics(r io.Reader) (procStats, error) {
	ps := procStats{callsProduced: -1, callsDropped: -1, callsFailed: -1}
	var gotCPU, gotRSS bool
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "name value [timestamp]"; HELP/TYPE comments and labelled
		// series have other first fields.
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "process_cpu_seconds_total":
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				ps.cpuSeconds, gotCPU = v, true
			}
		case "signalbox_calls_stream_produced_total", "signalbox_calls_stream_dropped_total", "signalbox_calls_stream_failed_total":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				continue
			}
			switch f[0] {
			case "signalbox_calls_stream_produced_total":
				ps.callsProduced = v
			case "signalbox_calls_stream_dropped_total":
				ps.callsDropped = v
			default:
				ps.callsFailed = v
			}
		case "process_resident_memory_bytes":
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				ps.rssBytes, gotRSS = v, true
			}
		default:
			// signalbox_curri_request_duration_seconds_bucket{le="0.001"} 123
			le, ok := strings.CutPrefix(f[0], durationBucket+`{le="`)
			if !ok {
				continue
			}
			le, _ = strings.CutSuffix(le, `"}`)
			bound, err1 := strconv.ParseFloat(le, 64)
			n, err2 := strconv.ParseFloat(f[1], 64)
			if err1 == nil && err2 == nil {
				ps.buckets = append(ps.buckets, bucket{le: bound, n: n})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return ps, fmt.Errorf("read /metrics: %w", err)
	}
	if !gotCPU || !gotRSS {
		return ps, errors.New("/metrics has no process_cpu_seconds_total or process_resident_memory_bytes (no process collector?)")
	}
	return ps, nil
}
