package bench

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// cpuPlan splits the CPUs this process may run on: the first n for serve,
// the rest for the harness (nfsim, probes). ok is false when there are not
// more than n CPUs, or n is 0 (serve then shares every CPU).
func cpuPlan(n int) (serve, harness []int, ok bool) {
	if n <= 0 {
		return nil, nil, false
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, nil, false
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) <= n {
		return nil, nil, false
	}
	return cpus[:n], cpus[n:], true
}

// startPinned starts cmd with its CPU affinity set to cpus (none: as this
// process). The child inherits the mask of the thread that forks it, and
// every thread it creates inherits its creator's, so pinning the forking
// thread for the duration of Start pins the whole child from its first
// instruction, with no window in which its runtime starts threads elsewhere.
//
// The child dies with the bench (Pdeathsig, tied to the forking thread:
// one left locked after a failed restore, and discarded, takes it along,
// as the failed start it reports should).
func startPinned(cmd *exec.Cmd, cpus []int) error {
	dieWithBench(cmd)
	if len(cpus) == 0 {
		return cmd.Start()
	}
	var set, old unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("read CPU affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPUs %s: %w", cpuList(cpus), err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		// This thread stays locked (and is discarded when its goroutine
		// ends) rather than run other goroutines on the child's CPUs.
		runtime.LockOSThread()
		return fmt.Errorf("restore CPU affinity: %w", rerr)
	}
	return err
}

// dieWithBench makes cmd's process die (SIGKILL) when the bench ends,
// however it ends: no serve, nfsim or probe is left running after it.
func dieWithBench(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
