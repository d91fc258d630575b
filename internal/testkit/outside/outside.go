// Package outside marks the tests that talk to outside programs and servers
// (tshark, kcat, Chromium, PostgreSQL) and finds those programs. It stands
// apart from testkit so that packages testkit itself imports (the broker)
// can use it too.
package outside

import (
	"os/exec"
	"testing"
)

// Mark marks a test that talks to an outside program or server. make test
// provides them all and runs such tests; the developers' fast loop, make
// test-unit (-short), leaves them out whether or not the tool happens to be
// installed.
func Mark(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("talks to %s: left out of -short (make test-unit); make test runs it", what)
	}
}

// Tool returns the path of an outside program a test talks to (see Mark).
// Missing, it fails the test: make test installs it.
func Tool(t testing.TB, name string) string {
	t.Helper()
	Mark(t, name)
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required (make test installs it): %v", name, err)
	}
	return path
}

// Long marks a test left out of -short (make test-unit) for its time, not
// for a tool: why says what it waits on. make test runs it.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: left out of -short (make test-unit); make test runs it", why)
	}
}
