package testkit

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit/ports"
)

// Trapd is a running net-snmp snmptrapd on a loopback UDP port that prints
// each notification it accepts as one line (its varbinds, tab-separated,
// named from the MIBs in mibDir), received on Lines.
type Trapd struct {
	Addr  string
	Lines chan string
}

// SNMPTrapd starts snmptrapd with conf (authCommunity, createUser,
// authUser lines) and the MIBs of mibDir loaded; it stops with the test.
func SNMPTrapd(t testing.TB, conf, mibDir string) *Trapd {
	t.Helper()
	bin := Tool(t, "snmptrapd")
	// snmptrapd is told its port: one reserved for it.
	addr := ports.Reserve(t, "127.0.0.1")
	dir := t.TempDir()
	confPath := filepath.Join(dir, "snmptrapd.conf")
	conf += "format2 TRAP %V\\t%v\\n\ndoNotRetainNotificationLogs yes\n"
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	mibs, _ := filepath.Glob(filepath.Join(mibDir, "*-MIB.txt"))
	load := "SNMPv2-MIB"
	for _, m := range mibs {
		load += ":" + strings.TrimSuffix(filepath.Base(m), ".txt")
	}
	cmd := Command(bin, "-f", "-n", "-C", "-c", confPath, "-Lo", "-M", "+"+mibDir, "-m", load, "udp:"+addr)
	cmd.Env = append(os.Environ(), "SNMP_PERSISTENT_DIR="+dir, "SNMPCONFPATH="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	d := &Trapd{Addr: addr, Lines: make(chan string, 100)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		started := false
		for sc.Scan() {
			line := sc.Text()
			if !started && strings.Contains(line, "NET-SNMP version") {
				started = true
				close(ready)
			}
			if strings.HasPrefix(line, "TRAP") {
				d.Lines <- line
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("snmptrapd did not start")
	}
	return d
}

// Next is the next notification snmptrapd accepted, waiting up to timeout.
func (d *Trapd) Next(t testing.TB, timeout time.Duration) string {
	t.Helper()
	select {
	case l := <-d.Lines:
		return l
	case <-time.After(timeout):
		t.Fatalf("snmptrapd received no notification in %s", timeout)
		return ""
	}
}

// None fails the test if snmptrapd accepts a notification within wait.
func (d *Trapd) None(t testing.TB, wait time.Duration) {
	t.Helper()
	select {
	case l := <-d.Lines:
		t.Fatalf("snmptrapd accepted a notification it should have refused: %s", l)
	case <-time.After(wait):
	}
}
