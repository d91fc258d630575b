package app

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/platform/config"
	"github.com/signalbox/signalbox/internal/testkit"
)

// TestDebianPackage builds the package as make package does, installs it
// with dpkg on this machine, checks what it put where, starts the binary
// the way its systemd unit does (the unit's user, working directory and
// command line; free loopback ports instead of the config file's, which
// the environment overrides as it would for an operator), and purges it.
func TestDebianPackage(t *testing.T) {
	t.Parallel()
	dpkg := testkit.Tool(t, "dpkg")
	sudo := []string{}
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root := func(args ...string) string { t.Helper(); all := append(sudo, args...); return run(all[0], all[1:]...) }

	dist := t.TempDir()
	// nfpm packs bin/signalbox (deploy/debian/nfpm.yaml): the binary
	// make test built there, or one built for the test and put there.
	if bin, err := filepath.Abs("../../bin/signalbox"); err != nil || testkit.Binary(t) != bin {
		b, err := os.ReadFile(testkit.Binary(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("../../bin", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../bin/signalbox", b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "tool", "nfpm", "package", "-p", "deb", "-f", "deploy/debian/nfpm.yaml", "-t", dist)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "SIGNALBOX_VERSION=0.0.0+test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nfpm: %v\n%s", err, out)
	}
	deb := filepath.Join(dist, "signalbox_0.0.0+test_amd64.deb")
	t.Cleanup(func() {
		if out, err := exec.Command(append(sudo, dpkg, "--purge", "signalbox")[0], append(sudo, dpkg, "--purge", "signalbox")[1:]...).CombinedOutput(); err != nil {
			t.Logf("purge at cleanup: %v\n%s", err, out)
		}
	})
	root(dpkg, "-i", deb)

	// What it installed, and as whom.
	for _, f := range []string{"/usr/bin/signalbox", "/lib/systemd/system/signalbox.service", "/etc/signalbox/signalbox.yaml",
		"/usr/share/signalbox/deploy/prometheus/signalbox.rules.yml", "/usr/share/signalbox/deploy/grafana/signalbox-curri.json",
		"/usr/share/signalbox/deploy/snmp/SIGNALBOX-MIB.txt", "/usr/share/snmp/mibs/SIGNALBOX-MIB.txt"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("installed: %v", err)
		}
	}
	// The capture interface, in Wireshark's global extcap folder.
	if to, err := os.Readlink("/usr/lib/x86_64-linux-gnu/wireshark/extcap/signalbox"); err != nil || to != "/usr/bin/signalbox" {
		t.Errorf("the extcap link: %q %v", to, err)
	}
	if out, err := exec.Command(testkit.Tool(t, "tshark"), "-D").CombinedOutput(); err != nil || !strings.Contains(string(out), "signalbox live SBI copies") {
		t.Errorf("tshark -D does not list the installed interface: %v\n%s", err, out)
	}
	u, err := user.Lookup("signalbox")
	if err != nil {
		t.Fatalf("the package's user: %v", err)
	}
	st, err := os.Stat("/var/lib/signalbox")
	if err != nil || !st.IsDir() || fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid) != u.Uid || st.Mode().Perm() != 0o750 {
		t.Fatalf("/var/lib/signalbox: %v %v", st, err)
	}
	if out := root(dpkg, "-s", "signalbox"); !strings.Contains(out, "Status: install ok installed") {
		t.Fatalf("dpkg -s: %s", out)
	}

	// The unit's user, working directory and command line.
	unit := map[string]string{}
	f, err := os.Open("/lib/systemd/system/signalbox.service")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			unit[k] = v
		}
	}
	f.Close()
	if unit["User"] != "signalbox" || unit["WorkingDirectory"] != "/var/lib/signalbox" || !strings.HasPrefix(unit["ExecStart"], "/usr/bin/signalbox serve") {
		t.Fatalf("unit: %v", unit)
	}
	argv := strings.Fields(unit["ExecStart"])
	if len(sudo) > 0 {
		argv = append(append(sudo, "-u", unit["User"], "--"), argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testkit.CommandContext(ctx, argv[0], argv[1:]...)
	if len(sudo) == 0 {
		// As the unit's user, the process itself (no runuser session in
		// between, so a SIGTERM reaches the server as systemd's does).
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		srv.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	srv.Dir = unit["WorkingDirectory"]
	// Every listener on a port of the kernel's choice, found in the
	// listeners file serve writes into its data directory.
	srv.Env = append(os.Environ(), "SIGNALBOX_HTTP_ADDR=127.0.0.1:0", "SIGNALBOX_CURRI_ADDR=127.0.0.1:0",
		"SIGNALBOX_KAFKA_ADDR=127.0.0.1:0", "SIGNALBOX_INGEST_ADDR=127.0.0.1:0")
	var out lockedBuffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	defer func() {
		if srv.Process != nil {
			_ = srv.Process.Signal(syscall.SIGTERM)
			<-exited
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	pid := srv.Process.Pid
	if len(sudo) > 0 {
		pid = 0 // serve is sudo's child: any pid (a fresh install has no file)
	}
	ls, err := config.WaitListeners(wctx, "/var/lib/signalbox", pid, exited)
	wcancel()
	if err != nil {
		t.Fatalf("the installed server: %v\n%s", err, out.String())
	}
	testkit.WaitFor(t, 30*time.Second, "the installed server ready", func() bool {
		resp, err := http.Get("http://" + ls.HTTP + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// It writes its data, as its own user, where the unit says.
	tok, err := os.Stat("/var/lib/signalbox/admin-token")
	if err != nil || fmt.Sprint(tok.Sys().(*syscall.Stat_t).Uid) != u.Uid {
		t.Errorf("admin token in the data dir: %v %v\n%s", tok, err, out.String())
	}
	if !strings.Contains(out.String(), `"msg":"store open"`) {
		t.Errorf("the config file's json logs: %s", out.String())
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if !srv.ProcessState.Success() {
			t.Errorf("stopped with %v\n%s", srv.ProcessState, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("not stopped 30 s after SIGTERM\n%s", out.String())
	}
	srv.Process = nil

	// Purged: binary, unit, config, data and user gone.
	root(dpkg, "--purge", "signalbox")
	for _, f := range []string{"/usr/bin/signalbox", "/lib/systemd/system/signalbox.service", "/etc/signalbox/signalbox.yaml", "/var/lib/signalbox"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left after purge", f)
		}
	}
	if _, err := user.Lookup("signalbox"); err == nil {
		t.Error("user signalbox left after purge")
	}
}
