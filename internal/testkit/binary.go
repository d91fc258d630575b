package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BinaryEnv names a signalbox binary built from this tree that tests may
// run instead of building their own: make test builds bin/signalbox once
// and hands it to every package's tests.
const BinaryEnv = "SIGNALBOX_TEST_BIN"

var built struct {
	once sync.Once
	path string
	err  error
}

// Binary is the path of a signalbox binary of this tree: $SIGNALBOX_TEST_BIN
// when set, else one built once per test process into a temporary
// directory (removed by the package's TestMain through RemoveBinary).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", BinaryEnv, err)
		}
		return p
	}
	built.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			built.err = err
			return
		}
		dir, err := os.MkdirTemp("", "signalbox-test-bin-")
		if err != nil {
			built.err = err
			return
		}
		bin := filepath.Join(dir, "signalbox")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/signalbox")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/signalbox: %v\n%s", err, b)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// RemoveBinary removes the binary Binary built, if it built one.
func RemoveBinary() {
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
}

// ModuleRoot is the directory of the module's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
