package testkit

import (
	"context"
	"os/exec"
)

// Command is exec.Command for a process a test starts and stops: the
// process dies with the test process however that ends — its timeout's
// panic, a crash, SIGKILL — rather than live on, orphaned, holding its
// ports and a share of the CPU for every later run (on Linux the kernel
// sends it SIGKILL, Pdeathsig; elsewhere the test must stop it).
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	DieWithParent(cmd)
	return cmd
}

// CommandContext is Command killed also when ctx ends.
func CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	DieWithParent(cmd)
	return cmd
}
