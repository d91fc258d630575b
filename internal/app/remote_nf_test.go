package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// produceEnv makes the test binary produce records with franz-go (TestMain,
// produceFromHere): an NF in another network namespace.
const produceEnv = "SIGNALBOX_TEST_PRODUCE"

type produceJob struct {
	Brokers []string
	Topic   string
	Prefix  string
	Count   int
}

// produceFromHere produces job's records, each value Prefix-i, and exits.
func produceFromHere(spec string) int {
	var job produceJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, produceEnv+":", err)
		return 2
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(job.Brokers...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "franz-go:", err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range job.Count {
		recs = append(recs, &kgo.Record{Topic: job.Topic, Value: fmt.Appendf(nil, "%s-%d", job.Prefix, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		fmt.Fprintln(os.Stderr, "franz-go produce:", err)
		return 1
	}
	return 0
}

// TestRemoteNFProduces: serve with the embedded broker on every interface
// (as by default, -kafka-addr :9092) is reachable by an NF on another host:
// a host of the test's own, a network namespace behind a veth pair, asks
// kcat for the metadata (the broker it is told to connect to is this
// host's address, not 127.0.0.1) and produces with kcat and with franz-go;
// every record reaches the topic.
func TestRemoteNFProduces(t *testing.T) {
	t.Parallel()
	ipTool, kcat := testkit.Tool(t, "ip"), testkit.Tool(t, "kcat")
	sudo := []string{}
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
	}
	run := func(args ...string) string {
		t.Helper()
		all := append(append([]string{}, sudo...), args...)
		out, err := exec.Command(all[0], all[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	ns, hostIf, nsIf := "sbnf"+id, "sbh"+id, "sbn"+id
	// A /30 in 10.231/16 from the id: parallel runs do not collide.
	net30 := int(rnd[1] & 0xfc)
	hostIP := fmt.Sprintf("10.231.%d.%d", rnd[0], net30+1)
	nsIP := fmt.Sprintf("10.231.%d.%d", rnd[0], net30+2)
	run(ipTool, "netns", "add", ns)
	t.Cleanup(func() {
		all := append(append([]string{}, sudo...), ipTool, "netns", "del", ns)
		_ = exec.Command(all[0], all[1:]...).Run()
		all = append(append([]string{}, sudo...), ipTool, "link", "del", hostIf)
		_ = exec.Command(all[0], all[1:]...).Run()
	})
	run(ipTool, "link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	run(ipTool, "link", "set", nsIf, "netns", ns)
	run(ipTool, "addr", "add", hostIP+"/30", "dev", hostIf)
	run(ipTool, "link", "set", hostIf, "up")
	run(ipTool, "-n", ns, "addr", "add", nsIP+"/30", "dev", nsIf)
	run(ipTool, "-n", ns, "link", "set", nsIf, "up")
	run(ipTool, "-n", ns, "link", "set", "lo", "up")
	run(ipTool, "-n", ns, "route", "add", "default", "via", hostIP)

	cfg := testConfig(t, t.TempDir(), true)
	cfg.KafkaAddr = ":0" // every interface, as the default :9092
	s := startServer(t, cfg)
	defer s.Shutdown()
	adv := s.KafkaAddrs()[0]
	host, port, _ := net.SplitHostPort(adv)
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
		t.Fatalf("the broker on every interface advertises %s: not an address another host can reach", adv)
	}

	// The metadata the NF is given names the host's address.
	nsExec := func(args ...string) *exec.Cmd {
		all := append(append(append([]string{}, sudo...), ipTool, "netns", "exec", ns), args...)
		return exec.Command(all[0], all[1:]...)
	}
	out, err := nsExec(kcat, "-L", "-J", "-b", adv, "-m", "10").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L from the NF's host: %v\n%s", err, out)
	}
	var md struct {
		Brokers []struct {
			Name string `json:"name"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal(out, &md); err != nil || len(md.Brokers) != 1 || md.Brokers[0].Name != net.JoinHostPort(host, port) {
		t.Fatalf("kcat -L: brokers %+v (%v), want %s\n%s", md.Brokers, err, adv, out)
	}

	// kcat produces 50, franz-go 50, both from the NF's host.
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, "kcat-%d\n", i)
	}
	kp := nsExec(kcat, "-P", "-b", adv, "-t", "SCP", "-m", "20")
	kp.Stdin = strings.NewReader(lines.String())
	if out, err := kp.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P from the NF's host: %v\n%s", err, out)
	}
	job, _ := json.Marshal(produceJob{Brokers: []string{adv}, Topic: "SCP", Prefix: "franz", Count: 50})
	fp := nsExec("env", produceEnv+"="+string(job), os.Args[0], "-test.run=^$")
	if out, err := fp.CombinedOutput(); err != nil {
		t.Fatalf("franz-go from the NF's host: %v\n%s", err, out)
	}

	seen := map[string]bool{}
	for _, r := range kafkatest.NewReader(t, broker.ClientConfig{Brokers: []string{adv}}, []string{"SCP"}).Read(100, 20*time.Second) {
		seen[string(r.Value)] = true
	}
	for _, want := range []string{"kcat-0", "kcat-49", "franz-0", "franz-49"} {
		if !seen[want] {
			t.Errorf("record %s missing", want)
		}
	}
	if len(seen) != 100 {
		t.Errorf("%d distinct records, want 100", len(seen))
	}
}
