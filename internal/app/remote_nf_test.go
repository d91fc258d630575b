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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

// beyondProducing tries, with cl's credential, what an NF must not do, and
// prints what each attempt got.
func beyondProducing(ctx context.Context, cl *kgo.Client, topic string) int {
	var r beyondResult
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	r.Read = cl.PollFetches(fctx).NumRecords()
	cancel()
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	adm := kadm.NewClient(cl)
	if resp, err := adm.DeleteTopics(ctx, topic); err != nil {
		r.DeleteTopic = err.Error()
	} else {
		r.DeleteTopic = errText(resp[topic].Err)
	}
	if resp, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 1}}}); err != nil {
		r.DeleteRecords = err.Error()
	} else {
		resp.Each(func(d kadm.DeleteRecordsResponse) { r.DeleteRecords += errText(d.Err) })
	}
	if resp, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "mallory", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "x"}}); err != nil {
		r.CreateUser = err.Error()
	} else {
		for _, u := range resp {
			r.CreateUser += errText(u.Err)
		}
	}
	if topics, err := adm.ListTopics(ctx); err == nil {
		r.TopicStillThere = topics.Has(topic)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// produceEnv makes the test binary produce records with franz-go (TestMain,
// produceFromHere): an NF in another network namespace.
const produceEnv = "SIGNALBOX_TEST_PRODUCE"

type produceJob struct {
	Brokers []string
	Topic   string
	Prefix  string
	Count   int
	// User and Password: SASL SCRAM-SHA-512 (none when empty).
	User, Password string
	// Beyond produces the job's client tries what its credential must not
	// do — read the topic, delete it, delete its records, create a user —
	// and prints what each got, as JSON, instead of producing.
	Beyond bool
	// Group: consume the topic in this group instead of producing, until
	// Count records or 15 s, and print how many came (consumeResult).
	Group string
}

// consumeResult is what a consuming job read.
type consumeResult struct {
	Read int
	Err  string
}

// beyondResult is what each attempt beyond producing got.
type beyondResult struct {
	Read                                   int
	DeleteTopic, DeleteRecords, CreateUser string // the errors
	TopicStillThere                        bool
}

// produceFromHere produces job's records, each value Prefix-i, and exits.
func produceFromHere(spec string) int {
	var job produceJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, produceEnv+":", err)
		return 2
	}
	cc := broker.ClientConfig{Brokers: job.Brokers}
	if job.User != "" {
		cc.SASLMechanism, cc.Username, cc.Password = broker.MechScramSHA512, job.User, job.Password
	}
	opts := []kgo.Opt{}
	if job.Group != "" {
		opts = append(opts, kgo.ConsumeTopics(job.Topic), kgo.ConsumerGroup(job.Group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if job.Beyond {
		opts = append(opts, kgo.ConsumeTopics(job.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	cl, err := cc.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "franz-go:", err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if job.Beyond {
		return beyondProducing(ctx, cl, job.Topic)
	}
	if job.Group != "" {
		var res consumeResult
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		for res.Read < job.Count && cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if cctx.Err() == nil {
					res.Err = err.Error()
				}
			})
			if res.Err != "" {
				break
			}
			res.Read += fs.NumRecords()
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
		return 0
	}
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

// TestRemoteNFProduces: serve (the binary) with the embedded broker on
// every interface (as by default, -kafka-addr :9092) is reachable by an NF
// on another host — a host of the test's own, a network namespace behind a
// veth pair — with the NF credential only. Without it, kcat and franz-go
// are refused; with it (SCRAM-SHA-512, the password serve made in its data
// directory), kcat reads the metadata (the broker it is told to connect to
// is this host's address, not 127.0.0.1) and kcat and franz-go produce,
// every record reaching the topic; and the credential reads no copy,
// deletes no topic nor record, creates no user. Clients on this host stay
// anonymous. The refusals are counted and logged with the NF's address.
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

	dir := t.TempDir()
	serve := startServeProc(t, []string{"-data-dir", filepath.Join(dir, "data"), "-http-addr", "127.0.0.1:0", "-curri-addr", "127.0.0.1:0",
		"-kafka-addr", ":0", // every interface, as the default :9092
		"-ingest-addr", "", "-admin-token", "test-admin-token", "-kafka-topics", "SCP=2,NRF=1,SEPP=1", "-log-level", "info"},
		filepath.Join(dir, "serve.log"))
	adv := serve.ls.KafkaAdvertised
	pwb, err := os.ReadFile(filepath.Join(dir, "data", "kafka-nf-password"))
	if err != nil {
		t.Fatalf("the NF credential: %v", err)
	}
	nfPW := strings.TrimSpace(string(pwb))
	sasl := []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=nf", "-X", "sasl.password=" + nfPW}
	host, port, _ := net.SplitHostPort(adv)
	if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() {
		t.Fatalf("the broker on every interface advertises %s: not an address another host can reach", adv)
	}

	// The metadata the NF is given names the host's address.
	nsExec := func(args ...string) *exec.Cmd {
		all := append(append(append([]string{}, sudo...), ipTool, "netns", "exec", ns), args...)
		return exec.Command(all[0], all[1:]...)
	}
	// Without a credential: refused.
	if out, err := nsExec(kcat, "-L", "-J", "-b", adv, "-m", "5").CombinedOutput(); err == nil {
		t.Fatalf("kcat -L from the NF's host without a credential: %s", out)
	}
	kp := nsExec(kcat, "-P", "-b", adv, "-t", "SCP", "-X", "message.timeout.ms=4000")
	kp.Stdin = strings.NewReader("anonymous-0\n")
	if out, err := kp.CombinedOutput(); err == nil {
		t.Fatalf("kcat -P from the NF's host without a credential: %s", out)
	}
	job, _ := json.Marshal(produceJob{Brokers: []string{adv}, Topic: "SCP", Prefix: "anonymous", Count: 1})
	if out, err := nsExec("env", produceEnv+"="+string(job), os.Args[0], "-test.run=^$").CombinedOutput(); err == nil {
		t.Fatalf("franz-go from the NF's host without a credential produced: %s", out)
	}

	// With the NF credential: the metadata names the host's address.
	out, err := nsExec(append([]string{kcat, "-L", "-J", "-b", adv, "-m", "10"}, sasl...)...).CombinedOutput()
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
	kp = nsExec(append([]string{kcat, "-P", "-b", adv, "-t", "SCP", "-m", "20"}, sasl...)...)
	kp.Stdin = strings.NewReader(lines.String())
	if out, err := kp.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P from the NF's host: %v\n%s", err, out)
	}
	job, _ = json.Marshal(produceJob{Brokers: []string{adv}, Topic: "SCP", Prefix: "franz", Count: 50, User: "nf", Password: nfPW})
	if out, err := nsExec("env", produceEnv+"="+string(job), os.Args[0], "-test.run=^$").CombinedOutput(); err != nil {
		t.Fatalf("franz-go from the NF's host: %v\n%s", err, out)
	}

	// Beyond producing, the NF credential gets nothing.
	job, _ = json.Marshal(produceJob{Brokers: []string{adv}, Topic: "SCP", User: "nf", Password: nfPW, Beyond: true})
	out, err = nsExec("env", produceEnv+"="+string(job), os.Args[0], "-test.run=^$").Output()
	var beyond beyondResult
	if err != nil || json.Unmarshal(out, &beyond) != nil {
		t.Fatalf("the NF credential beyond producing: %v\n%s", err, out)
	}
	if beyond.Read != 0 || !strings.Contains(beyond.DeleteTopic, "TOPIC_AUTHORIZATION_FAILED") ||
		!strings.Contains(beyond.DeleteRecords, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(beyond.CreateUser, "CLUSTER_AUTHORIZATION_FAILED") || !beyond.TopicStillThere {
		t.Errorf("the NF credential beyond producing: %+v; want nothing read, each refused, the topic there", beyond)
	}

	// On this host, no credential: every record is there.
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
		t.Errorf("%d distinct records, want 100 (none of the anonymous ones)", len(seen))
	}

	// A kafka feed's consumers on the NF's host: the feed's credential
	// (admin only, audited) reads its topic with its own groups, nothing
	// else, and not once revoked.
	if code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "POST", "/api/v1/feeds",
		`{"name":"lake","type":"kafka","sources":["SCP"],"topic":"LAKE","start":"earliest"}`); code != 201 {
		t.Fatalf("create feed lake: %d %s", code, body)
	}
	if code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "POST", "/api/v1/feeds",
		`{"name":"web","type":"http2","sources":["SCP"],"url":"http://127.0.0.1:9/copies"}`); code != 201 {
		t.Fatalf("create feed web: %d %s", code, body)
	}
	if code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "POST", "/api/v1/feeds/web/credential", ""); code != 409 {
		t.Errorf("a credential for an http2 feed: %d %s, want 409", code, body)
	}
	code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "POST", "/api/v1/feeds/lake/credential", "")
	var cred struct {
		User, Password, Mechanism, Topic string
		GroupPrefix                      string `json:"group_prefix"`
		Brokers                          []string
	}
	if code != 201 || json.Unmarshal(body, &cred) != nil || cred.Topic != "LAKE" || cred.Mechanism != "SCRAM-SHA-512" || len(cred.Brokers) != 1 {
		t.Fatalf("the consumer credential of lake: %d %s", code, body)
	}
	consume := func(topic, group string, n int) consumeResult {
		t.Helper()
		job, _ := json.Marshal(produceJob{Brokers: cred.Brokers, Topic: topic, Group: group, Count: n, User: cred.User, Password: cred.Password})
		out, err := nsExec("env", produceEnv+"="+string(job), os.Args[0], "-test.run=^$").Output()
		var res consumeResult
		if err != nil || json.Unmarshal(out, &res) != nil {
			return consumeResult{Err: fmt.Sprintf("%v: %s", err, out)}
		}
		return res
	}
	// Copies (the records above are not: the feed sets them aside), from
	// this host, which lake relays into LAKE.
	local, err := kgo.NewClient(kgo.SeedBrokers(adv))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	for i := range 20 {
		if err := local.ProduceSync(pctx, &kgo.Record{Topic: "SCP", Value: fixture.Record(fmt.Sprintf("lake-%d", i), "SCP", nfcopy.RequestIngress)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if res := consume("LAKE", cred.GroupPrefix+"-analytics", 20); res.Read < 20 || res.Err != "" {
		t.Errorf("lake's consumer on the NF's host read %d of the 20 copies: %s", res.Read, res.Err)
	}
	if res := consume("SCP", cred.GroupPrefix+"-analytics", 1); res.Read != 0 {
		t.Errorf("lake's consumer read %d copies of SCP", res.Read)
	}
	if res := consume("LAKE", "another-group", 1); res.Read != 0 {
		t.Errorf("lake's consumer with another's group: %+v, want refused", res)
	}
	if code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "DELETE", "/api/v1/feeds/lake/credential", ""); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if res := consume("LAKE", cred.GroupPrefix+"-again", 1); res.Read != 0 {
		t.Errorf("a revoked credential read %d copies", res.Read)
	}
	if log := serve.tail(1 << 20); !strings.Contains(log, `reason=auth_failed detail="user \"feed-lake\"`) {
		t.Errorf("serve's log lacks the revoked credential's failure")
	}
	if code, body := apiAt(t, serve.ls.HTTP, "test-admin-token", "GET", "/api/v1/audit?resource=kafka_credentials", ""); code != 200 ||
		!strings.Contains(string(body), "issue kafka consumer credential") || !strings.Contains(string(body), "revoke kafka consumer credential") {
		t.Errorf("the audit log of the credential: %d %s", code, body)
	}

	// Counted, and logged with the NF's address and user.
	_, m := get(t, "http://"+serve.ls.HTTP+"/metrics")
	for reason, want := range map[string]float64{"unauthenticated": 2, "denied": 3} {
		if got := metricValue(m, `signalbox_kafka_refused_total{reason="`+reason+`"}`); got < want {
			t.Errorf("signalbox_kafka_refused_total{reason=%q} = %v, want at least %v", reason, got, want)
		}
	}
	log := serve.tail(1 << 20)
	for _, want := range []string{"reason=unauthenticated", "client=" + nsIP + ":", "reason=denied", "user nf (producer) may not"} {
		if !strings.Contains(log, want) {
			t.Errorf("serve's log lacks %q", want)
		}
	}
}
