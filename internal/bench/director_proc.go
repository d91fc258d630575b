package bench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procSample is a process's CPU time and peak RSS at one moment.
type procSample struct {
	At     time.Time
	CPU    time.Duration // user + system
	HWMKiB int64         // VmHWM: peak resident set
	RSSKiB int64         // VmRSS: resident set now (0 from getrusage)
}

// readProc samples /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procSample, error) {
	s := procSample{At: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	s.CPU, err = parseProcStat(b)
	if err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read /proc/%d/status: %w", pid, err)
	}
	s.HWMKiB, s.RSSKiB = statusKiB(b, "VmHWM:"), statusKiB(b, "VmRSS:")
	return s, nil
}

// parseProcStat returns utime+stime. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no ')' in stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name, want >= 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q stime %q: not numbers", f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// parseVmHWM returns VmHWM in KiB, 0 if absent.
func parseVmHWM(b []byte) int64 { return statusKiB(b, "VmHWM:") }

// statusKiB is the kB figure of the /proc/<pid>/status line of key.
func statusKiB(b []byte, key string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// proc is a child signalbox process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error // valid after done
	last procSample
}

// tailBuffer keeps the whole output of a child (small: children log little)
// and copies it to an optional writer.
type tailBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	copy io.Writer
	name string
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf.Len() < 4<<20 {
		t.buf.Write(p)
	}
	if t.copy != nil {
		fmt.Fprintf(t.copy, "[%s] %s", t.name, p)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// startProcEnv starts bin with args and env added to this process's
// environment, pinned to cpus unless that is empty; its output is kept (and
// echoed to echo when not nil) and written to logFile at the end.
func startProcEnv(_ context.Context, name, bin string, args, env []string, cpus []int, echo io.Writer) (*proc, error) {
	p := &proc{name: name, out: &tailBuffer{copy: echo, name: name}, done: make(chan struct{})}
	// Not CommandContext: the bench stops children with SIGINT so they write
	// their reports; ctx only bounds how long we wait.
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	if err := startPinned(p.cmd, cpus); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// sample reads the child's /proc figures; once it exited, the last sample
// stands.
func (p *proc) sample() procSample {
	if s, err := readProc(p.pid()); err == nil {
		p.last = s
	}
	return p.last
}

// exited reports rusage-based figures after the child ended.
func (p *proc) exited() procSample {
	st := p.cmd.ProcessState
	if st == nil {
		return p.last
	}
	return procSample{At: time.Now(), CPU: st.UserTime() + st.SystemTime(), HWMKiB: peakRSS(st)}
}

// stop interrupts the child and waits up to grace, then kills it.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s: killed after %v without exiting", p.name, grace)
	}
}

// wait waits for the child to exit by itself.
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: %w\n%s", p.name, p.err, lastLines(p.out.String(), 15))
		}
		return nil
	case <-ctx.Done():
		_ = p.stop(5 * time.Second)
		return ctx.Err()
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeSelfSigned writes a self-signed ECDSA certificate for localhost and
// 127.0.0.1 (the consumer's server certificate; the feed trusts it as CA).
func writeSelfSigned(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "signalbox bench probe"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("create certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("marshal key: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "probe-cert.pem"), filepath.Join(dir, "probe-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// cpuList formats CPU numbers as taskset does: "0", "1,3".
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// waitReady polls /readyz until 200.
func waitReady(ctx context.Context, base string, p *proc) error {
	deadline := time.Now().Add(60 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while starting: %v\n%s", p.name, p.err, lastLines(p.out.String(), 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 60s\n%s", p.name, lastLines(p.out.String(), 20))
		}
	}
}

// probeAddr waits for a probe process to say where it listens ("probe:
// <mode> on <addr>", its first line), or to exit.
func probeAddr(ctx context.Context, p *proc, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		for _, line := range strings.Split(p.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "probe: "); ok {
				if _, addr, ok := strings.Cut(rest, " on "); ok && !strings.Contains(addr, " ") {
					return addr, nil
				}
			}
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("%s exited while starting: %v\n%s", p.name, p.err, lastLines(p.out.String(), 20))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not say where it listens within %s\n%s", p.name, limit, lastLines(p.out.String(), 20))
		}
	}
}
