package director

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
)

// A node is a signalbox director in a process of its own, so that a test
// can pause it (SIGSTOP) past its session timeout or kill it (SIGKILL)
// while the others go on: the test binary runs itself with nodeEnv set to
// the node's configuration, and TestMain hands over to runNode.
const nodeEnv = "SIGNALBOX_DIRECTOR_TEST_NODE"

type nodeConfig struct {
	Kafka          broker.ClientConfig
	Feeds          []FeedSpec
	SessionTimeout time.Duration
	Solo           bool   // Config.SoloReads: every feed reads on its own
	Node           string // Config.Node
}

func TestMain(m *testing.M) {
	if c := os.Getenv(nodeEnv); c != "" {
		os.Exit(runNode(c))
	}
	os.Exit(m.Run())
}

// nodeTest starts a test that runs nodes as processes: in parallel with
// the others (they mostly wait on their nodes), and not in -short (make
// test-unit), where their minute of waiting is not worth it.
func nodeTest(t *testing.T) {
	t.Helper()
	testkit.Long(t, "runs signalbox nodes as processes")
	t.Parallel()
}

// runNode runs a Manager with the feeds of c (synthetic feeds write to the
// acknowledged TCP test receiver at their endpoint; others use the real
// sinks) until SIGTERM.
func runNode(c string) int {
	var nc nodeConfig
	if err := json.Unmarshal([]byte(c), &nc); err != nil {
		fmt.Fprintln(os.Stderr, "node config:", err)
		return 2
	}
	var m *Manager
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: nodeLogLevel()}))
	nc.Kafka.Logger = log
	m, err := NewManager(Config{
		Client: nc.Kafka, Topics: testTopics[:3], Registerer: prometheus.NewRegistry(), Node: nc.Node,
		Logger: log, SessionTimeout: nc.SessionTimeout, CreateTopics: true, Sharing: Sharing{SoloReads: nc.Solo},
		BackoffMin: 50 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		NewSink: func(spec *FeedSpec) (Sink, error) {
			if spec.Type == TypeSynthetic {
				return &tcpSink{addr: spec.Endpoint}, nil
			}
			return m.defaultSink(spec)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	go reportHeld(ctx, m)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = m.Apply(actx, nc.Feeds)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node apply:", err)
		return 2
	}
	<-done
	return 0
}

// reportHeld prints, whenever it changes, how many partitions each feed of
// m holds: what the tests wait on (the librdkafka mock cluster does not
// describe groups).
func reportHeld(ctx context.Context, m *Manager) {
	last := map[string]int{}
	for sleepCtx(ctx, 50*time.Millisecond) {
		m.rmu.Lock()
		for name, l := range m.ledgers {
			if n := l.ownedCount(); n != last[name] {
				last[name] = n
				fmt.Printf("held %s %d\n", name, n)
			}
		}
		m.rmu.Unlock()
	}
}

func (l *ledger) ownedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.parts {
		if s.owned {
			n++
		}
	}
	return n
}

// held is how many partitions the node last said feed holds.
func (n *nodeProc) held(feed string) int {
	out := n.output()
	i := strings.LastIndex(out, "held "+feed+" ")
	if i < 0 {
		return 0
	}
	var h int
	fmt.Sscanf(out[i+len("held "+feed+" "):], "%d", &h)
	return h
}

// waitHeld waits until each of nodes holds partitions of feed, total in all.
func waitHeld(t *testing.T, nodes []*nodeProc, feed string, total int, timeout time.Duration) {
	t.Helper()
	testkit.WaitForState(t, timeout, fmt.Sprintf("%d nodes to share the %d partitions of feed %s", len(nodes), total, feed), func() (bool, string) {
		sum, all := 0, true
		var hs []int
		for _, n := range nodes {
			h := n.held(feed)
			hs = append(hs, h)
			sum += h
			all = all && h > 0
		}
		return all && sum == total, fmt.Sprint(hs)
	})
}

// nodeProc is a running node.
type nodeProc struct {
	t   *testing.T
	cmd *exec.Cmd
	out *strings.Builder
}

func startNode(t *testing.T, nc nodeConfig) *nodeProc {
	t.Helper()
	c, err := json.Marshal(nc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := testkit.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(c))
	out := &strings.Builder{}
	w := &lockedWriter{w: out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nodeProc{t: t, cmd: cmd, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		if t.Failed() && os.Getenv("DIRECTOR_TEST_LOG") != "" {
			_ = cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump
			time.Sleep(time.Second)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("node %d output:\n%s", cmd.Process.Pid, n.output())
		}
	})
	return n
}

func (n *nodeProc) signal(s os.Signal) {
	if err := n.cmd.Process.Signal(s); err != nil {
		n.t.Fatalf("signal %v: %v", s, err)
	}
}

func (n *nodeProc) output() string {
	w := n.cmd.Stdout.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return n.out.String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// commitWatch polls a group's committed offsets and records every time one
// moved backwards, and, given what the consumers have, the most copies ever
// delivered past the commits: what a hand-over may deliver again.
type commitWatch struct {
	mu        sync.Mutex
	last      map[tp]int64
	backwards []string
	window    int
	stop      context.CancelFunc
	done      chan struct{}
}

func watchCommits(m *Manager, group string) *commitWatch { return watchDelivery(m, group, nil) }

// watchDelivery is watchCommits that also tracks the window: delivered()
// (distinct copies the consumers have, all from the group's sources) less
// the copies below the commits, at each poll that read them all.
func watchDelivery(m *Manager, group string, delivered func() int) *commitWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &commitWatch{last: map[tp]int64{}, stop: cancel, done: make(chan struct{})}
	parts := map[string][]int32{"SCP": {0, 1, 2, 3}, "NRF": {0, 1}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			offs, err := m.committed(ctx, group, parts)
			if err == nil {
				w.mu.Lock()
				below, errs := 0, 0
				offs.Each(func(o kadm.OffsetResponse) {
					if o.Err != nil {
						errs++
						return
					}
					if o.At < 0 {
						return
					}
					below += int(o.At)
					k := tp{o.Topic, o.Partition}
					if prev, ok := w.last[k]; ok && o.At < prev {
						w.backwards = append(w.backwards, fmt.Sprintf("%s/%d: %d after %d", o.Topic, o.Partition, o.At, prev))
					}
					w.last[k] = o.At
				})
				if delivered != nil && errs == 0 {
					// After the commits were read: a copy counts as
					// delivered past them rather than not at all.
					w.window = max(w.window, delivered()-below)
				}
				w.mu.Unlock()
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}()
	return w
}

func (w *commitWatch) finish() []string {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backwards
}

// maxWindow is the most copies the consumers had past the commits.
func (w *commitWatch) maxWindow() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.window
}

func nodeLogLevel() slog.Level {
	if os.Getenv("DIRECTOR_TEST_LOG") != "" {
		return slog.LevelDebug
	}
	// Info, not Warn: a failed test prints its nodes' output, and what an
	// exactly-once feed does about a rebalance (an aborted transaction,
	// read again) is said at Info.
	return slog.LevelInfo
}
