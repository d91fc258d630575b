package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartPinned checks cpuPlan's split and starts a child on the last CPU
// of this process's mask (on a one-CPU machine, that CPU), then checks the
// kernel's view of the child's CPUs, and that the bench's own thread got its
// mask back.
func TestStartPinned(t *testing.T) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Fatal(err)
	}
	serve, harness, ok := cpuPlan(1)
	switch {
	case mask.Count() == 1 && ok:
		t.Fatalf("cpuPlan(1) pins on one CPU: %v, %v", serve, harness)
	case mask.Count() > 1 && (!ok || len(serve) != 1 || len(harness) != mask.Count()-1 || serve[0] == harness[0]):
		t.Fatalf("cpuPlan(1) on %d CPUs = %v, %v, %v", mask.Count(), serve, harness, ok)
	}
	if _, _, ok := cpuPlan(0); ok {
		t.Fatal("cpuPlan(0) pins: serve on Go's default should share every CPU")
	}
	if _, _, ok := cpuPlan(mask.Count()); ok {
		t.Fatal("cpuPlan(all CPUs) pins: nothing left for the harness")
	}
	cpu := -1
	for c := 0; c < len(mask)*64; c++ {
		if mask.IsSet(c) {
			cpu = c
		}
	}
	cmd := exec.Command("sleep", "10")
	if err := startPinned(cmd, []int{cpu}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var allowed string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			allowed = strings.TrimSpace(v)
		}
	}
	if allowed != strconv.Itoa(cpu) {
		t.Errorf("child's Cpus_allowed_list %q, want %d", allowed, cpu)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != mask {
		t.Errorf("this thread's CPUs %d after the start, %d before", after.Count(), mask.Count())
	}
}
