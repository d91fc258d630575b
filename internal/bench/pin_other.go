//go:build !linux

package bench

import "os/exec"

// cpuPlan: CPU pinning is Linux-only; elsewhere serve shares every CPU.
func cpuPlan(int) (serve, harness []int, ok bool) { return nil, nil, false }

// startPinned starts cmd unpinned (CPU pinning is Linux-only).
func startPinned(cmd *exec.Cmd, _ []int) error { return cmd.Start() }

// dieWithBench: only Linux has Pdeathsig; the bench stops its children.
func dieWithBench(*exec.Cmd) {}
