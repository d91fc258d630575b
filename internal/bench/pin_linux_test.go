package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartPinned starts a child on the last CPU of cpuPlan's harness share
// and checks the kernel's view of the child's CPUs, and that the bench's
// own thread got its mask back.
func TestStartPinned(t *testing.T) {
	serve, harness, ok := cpuPlan(1)
	if !ok {
		t.Skip("one CPU: nothing to pin apart")
	}
	if len(serve) != 1 || len(harness) == 0 || serve[0] == harness[0] {
		t.Fatalf("cpuPlan(1) = %v, %v", serve, harness)
	}
	if _, _, ok := cpuPlan(0); ok {
		t.Fatal("cpuPlan(0) pins: serve on Go's default should share every CPU")
	}
	if _, _, ok := cpuPlan(len(serve) + len(harness)); ok {
		t.Fatal("cpuPlan(all CPUs) pins: nothing left for the harness")
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	cpu := harness[len(harness)-1]
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
	if after != before {
		t.Errorf("this thread's CPUs %d after the start, %d before", after.Count(), before.Count())
	}
}
