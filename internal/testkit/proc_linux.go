package testkit

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd's process die (SIGKILL) when the process that
// starts it ends. The kernel ties it to the starting thread, and the Go
// runtime does not end its threads while the process lives (a goroutine
// locked to its thread that exits would: tests start children from
// unlocked goroutines).
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
