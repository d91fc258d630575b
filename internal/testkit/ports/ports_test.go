package ports

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holderEnv makes the test binary a process that takes ports and holds
// them until its standard input closes.
const holderEnv = "PORTS_TEST_HOLD"

func TestMain(m *testing.M) {
	if n := os.Getenv(holderEnv); n != "" {
		os.Exit(hold(n))
	}
	os.Exit(m.Run())
}

// hold takes n ports, prints each as it gets it, and keeps them until its
// standard input closes.
func hold(n string) int {
	count, _ := strconv.Atoi(n)
	var held []*Reservation
	for range count {
		r, err := Take("127.0.0.1")
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		held = append(held, r)
		fmt.Println(r.Port)
	}
	fmt.Println("done")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestTwoProcessesNeverShare: two test processes taking 300 ports each at
// the same moment get 600 different ones, none in the kernel's range for
// ":0".
func TestTwoProcessesNeverShare(t *testing.T) {
	first, last, err := Range()
	if err != nil {
		t.Fatal(err)
	}
	const each = 300
	type result struct {
		ports []int
		err   error
	}
	results := make(chan result, 2)
	var stdins []io.WriteCloser
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), holderEnv+"="+strconv.Itoa(each))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, in)
		t.Cleanup(func() { in.Close(); cmd.Wait() })
		go func() {
			var r result
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if line == "done" {
					results <- r
					return
				}
				p, err := strconv.Atoi(line)
				if err != nil {
					r.err = fmt.Errorf("holder: %s", line)
					results <- r
					return
				}
				r.ports = append(r.ports, p)
			}
			r.err = fmt.Errorf("holder ended after %d ports", len(r.ports))
			results <- r
		}()
	}
	seen := map[int]int{}
	for i := range 2 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.ports) != each {
				t.Fatalf("holder %d took %d ports, want %d", i, len(r.ports), each)
			}
			for _, p := range r.ports {
				seen[p]++
				if p < first || p > last {
					t.Errorf("port %d outside %d-%d", p, first, last)
				}
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the holders did not take their ports within 60 s")
		}
	}
	// Both still hold theirs: a third taker here gets neither's.
	r, err := Take("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	seen[r.Port]++
	for p, n := range seen {
		if n > 1 {
			t.Errorf("port %d handed out %d times", p, n)
		}
	}
	if len(seen) != 2*each+1 {
		t.Errorf("%d different ports, want %d", len(seen), 2*each+1)
	}
	for _, in := range stdins {
		in.Close()
	}
}

// TestTakeSkipsHeldPorts: a port in the range that a process outside the
// tests listens on is skipped, and a released port can be taken again.
func TestTakeSkipsHeldPorts(t *testing.T) {
	t.Setenv(LockDirEnv, t.TempDir()) // no other process's locks
	first, last, err := Range()
	if err != nil {
		t.Fatal(err)
	}
	// A port in the range bound without a lock, as an outside server would.
	var busy net.Listener
	for p := first + 5000; p < last-1 && busy == nil; p++ {
		busy, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	}
	if busy == nil {
		t.Fatal("no port in the range to bind")
	}
	defer busy.Close()
	bp := busy.Addr().(*net.TCPAddr).Port
	r, err := take("127.0.0.1", bp, bp+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Port != bp+1 {
		t.Errorf("took %d, want %d: %d is held", r.Port, bp+1, bp)
	}
	if _, err := take("127.0.0.1", bp, bp+1, 0); err == nil || !strings.Contains(err.Error(), "no port free") {
		t.Errorf("both held, take answered %v", err)
	}
	r.Release()
	r2, err := take("127.0.0.1", bp, bp+1, 0)
	if err != nil || r2.Port != bp+1 {
		t.Fatalf("after its release: %v %v", r2, err)
	}
	r2.Release()
}
