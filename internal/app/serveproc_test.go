package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/testkit"
)

// serveProc is the signalbox binary's serve as a child of the test: a
// process a test can kill -9 and start again on its data directory. It
// dies with the test process (testkit.Command); where it listens is read
// from its listeners file, so its listeners may ask for port 0.
type serveProc struct {
	t       *testing.T
	args    []string
	dataDir string
	log     string
	cmd     *exec.Cmd
	exited  chan struct{}
	// ls is where it listens, as its listeners file said at its last start.
	ls config.Listeners
}

// errBind is a start that failed because a listener's address was taken.
var errBind = errors.New("a listen address is taken")

// startServeProc starts serve with args (which name -data-dir), its output
// appended to log, and waits until it serves its API. The test fails with
// the process's log when it does not within a minute.
func startServeProc(t *testing.T, args []string, log string) *serveProc {
	t.Helper()
	p := newServeProc(t, args, log)
	if err := p.tryStart(); err != nil {
		t.Fatalf("serve: %v\n%s", err, p.tail(4000))
	}
	return p
}

// newServeProc prepares a serve process, killed and its log shown (when the
// test failed) at the test's end.
func newServeProc(t *testing.T, args []string, log string) *serveProc {
	t.Helper()
	i := slices.Index(args, "-data-dir")
	if i < 0 || i+1 >= len(args) {
		t.Fatal("serveProc: the args name no -data-dir")
	}
	p := &serveProc{t: t, args: args, dataDir: args[i+1], log: log}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("serve process log %s (last 6000 bytes):\n%s", log, p.tail(6000))
		}
	})
	return p
}

// start starts the process again on its data directory and waits until it
// serves its API, failing the test with its log otherwise.
func (p *serveProc) start() {
	p.t.Helper()
	if err := p.tryStart(); err != nil {
		p.t.Fatalf("serve: %v\n%s", err, p.tail(4000))
	}
}

// tryStart starts the process and waits (a minute at most) until it wrote
// its listeners file and answers on its API; errBind when it exited because
// an address was taken.
func (p *serveProc) tryStart() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	p.cmd = testkit.Command(testkit.Binary(p.t), append([]string{"serve"}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { cmd.Wait(); close(exited) }(p.cmd, p.exited)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls, err := config.WaitListeners(ctx, p.dataDir, p.cmd.Process.Pid, p.exited)
	if err != nil {
		p.kill()
		if strings.Contains(p.tail(4000), "address already in use") {
			return fmt.Errorf("%w: %v", errBind, err)
		}
		return err
	}
	p.ls = ls
	// The listeners file is written once every listener is up: the API
	// answers now.
	if c, body := apiAtQuiet(ls.HTTP, "test-admin-token", "GET", "/api/v1/version"); c != 200 {
		p.kill()
		return fmt.Errorf("serve wrote its listeners file, and its API at %s answered %d %s", ls.HTTP, c, body)
	}
	return nil
}

// http is the API's address at the last start.
func (p *serveProc) http() string { return p.ls.HTTP }

// kill kills the process (SIGKILL) and waits for it.
func (p *serveProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.exited
		p.cmd = nil
	}
}

// tail is the last n bytes of the process's log.
func (p *serveProc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	return string(b[max(0, len(b)-n):])
}
