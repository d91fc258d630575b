//go:build !linux

package testkit

import "os/exec"

// DieWithParent does nothing here: only Linux has Pdeathsig; the test
// stops its children itself.
func DieWithParent(*exec.Cmd) {}
