package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/testkit/outside"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func startBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Start(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func client(t *testing.T, cc ClientConfig, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := cc.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// consume reads n records from topic with a fresh or existing group.
func consume(t *testing.T, cc ClientConfig, group, topic string, n int) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.DisableAutoCommit())
	}
	cl, err := cc.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := tctx(t, 15*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		out = append(out, fs.Records()...)
	}
	if group != "" {
		if err := cl.CommitRecords(ctx, out...); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	return out
}

func TestDefaultTopicsCreated(t *testing.T) {
	b := startBroker(t, Config{})
	adm := kadm.NewClient(client(t, b.ClientConfig()))
	td, err := adm.ListTopics(tctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range DefaultTopics() {
		d, ok := td[want.Name]
		if !ok {
			t.Errorf("topic %s missing", want.Name)
			continue
		}
		if len(d.Partitions) != want.Partitions {
			t.Errorf("topic %s: %d partitions, want %d", want.Name, len(d.Partitions), want.Partitions)
		}
	}
	rc, err := adm.DescribeTopicConfigs(tctx(t, 10*time.Second), "SCP")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("SCP", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ret string
	for _, kv := range c.Configs {
		if kv.Key == "retention.ms" {
			ret = kv.MaybeValue()
		}
	}
	if ret != "300000" {
		t.Errorf("SCP retention.ms = %q, want 300000", ret)
	}
}

func TestProduceErrors(t *testing.T) {
	b := startBroker(t, Config{MaxMessageBytes: 64 << 10})
	cc := b.ClientConfig()
	big := ClientConfig{Brokers: cc.Brokers, MaxMessageBytes: 1 << 20} // client allows more than the broker
	tests := []struct {
		name  string
		cc    ClientConfig
		topic string
		size  int
		check func(error) bool
	}{
		{"fits", cc, "SCP", 60 << 10, func(err error) bool { return err == nil }},
		{"too large for broker", big, "SCP", 100 << 10, IsTooLarge},
		{"too large for client", cc, "SCP", 2 << 20, IsTooLarge},
		{"unknown topic refused", cc, "SCPP", 10, IsUnknownTopic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := client(t, tt.cc)
			start := time.Now()
			v := make([]byte, tt.size)
			rand.Read(v) // incompressible, so the batch really is this large
			err := cl.ProduceSync(tctx(t, 20*time.Second), &kgo.Record{Topic: tt.topic, Value: v}).FirstErr()
			if !tt.check(err) {
				t.Fatalf("produce %d bytes to %s: err = %v", tt.size, tt.topic, err)
			}
			if time.Since(start) > 15*time.Second {
				t.Errorf("error took %s", time.Since(start))
			}
		})
	}
	// The refused topic was not created as a side effect.
	td, err := kadm.NewClient(client(t, cc)).ListTopics(tctx(t, 10*time.Second), "SCPP")
	if err != nil {
		t.Fatal(err)
	}
	if d := td["SCPP"]; d.Err == nil {
		t.Fatalf("unknown topic SCPP was created")
	}
}

func TestAutoCreateWhenConfigured(t *testing.T) {
	b := startBroker(t, Config{AutoCreateTopics: true})
	cl := client(t, b.ClientConfig(), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(tctx(t, 20*time.Second), &kgo.Record{Topic: "NEWNF", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("auto-create produce: %v", err)
	}
}

func TestRestartKeepsDataAndOffsets(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, Config{DataDir: dir})
	cl := client(t, b.ClientConfig())
	const n = 100
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "NRF", Key: []byte{byte(i)}, Value: fmt.Appendf(nil, "copy-%03d", i)})
	}
	if err := cl.ProduceSync(tctx(t, 10*time.Second), recs[:60]...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, b.ClientConfig(), "g1", "NRF", 60) // commits 60
	if len(got) != 60 {
		t.Fatalf("consumed %d", len(got))
	}
	cl.Close()
	b.Close()

	b2 := startBroker(t, Config{DataDir: dir})
	cl2 := client(t, b2.ClientConfig())
	if err := cl2.ProduceSync(tctx(t, 10*time.Second), recs[60:]...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// All 100 survive; the group resumes after its 60 committed copies.
	if all := consume(t, b2.ClientConfig(), "", "NRF", n); len(all) != n {
		t.Fatalf("after restart %d records, want %d", len(all), n)
	}
	rest := consume(t, b2.ClientConfig(), "g1", "NRF", n-60)
	seen := map[string]bool{}
	for _, r := range rest {
		seen[string(r.Value)] = true
	}
	for i := 60; i < n; i++ {
		if !seen[fmt.Sprintf("copy-%03d", i)] {
			t.Errorf("copy-%03d not delivered after restart", i)
		}
	}
	if len(rest) != n-60 {
		t.Errorf("group got %d records after restart, want %d", len(rest), n-60)
	}
}

func TestRetentionDeletesOldData(t *testing.T) {
	b := startBroker(t, Config{Retention: time.Second, Topics: []TopicSpec{{Name: "SCP", Partitions: 1}}})
	cl := client(t, b.ClientConfig())
	for range 3 {
		if err := cl.ProduceSync(tctx(t, 10*time.Second), &kgo.Record{Topic: "SCP", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		so, err := adm.ListStartOffsets(tctx(t, 5*time.Second), "SCP")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := so.Lookup("SCP", 0); o.Offset == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log start offset never reached 3 with 1s retention")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestSASL(t *testing.T) {
	for _, mech := range []string{MechPlain, MechScramSHA256, MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			b := startBroker(t, Config{SASL: &SASLConfig{Mechanism: mech, Users: map[string]string{"nf": "s3cret"}}})
			good := b.ClientConfig()
			if good.Username != "nf" {
				t.Fatalf("client user %q", good.Username)
			}
			if err := client(t, good).ProduceSync(tctx(t, 10*time.Second), &kgo.Record{Topic: "SCP", Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatalf("right password: %v", err)
			}
			bad := good
			bad.Password = "wrong"
			err := client(t, bad).Ping(tctx(t, 10*time.Second))
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Fatalf("wrong password: err = %v, want a SASL authentication error", err)
			}
			unknown := good
			unknown.Username = "nobody"
			err = client(t, unknown).Ping(tctx(t, 10*time.Second))
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Fatalf("unknown user: err = %v, want a SASL authentication error", err)
			}
			none := good
			none.SASLMechanism = ""
			err = client(t, none).Ping(tctx(t, 10*time.Second))
			if err == nil {
				t.Fatalf("no credentials accepted")
			}
		})
	}
}

func TestEnsureTopicsNoCreate(t *testing.T) {
	b := startBroker(t, Config{Topics: []TopicSpec{{Name: "SCP", Partitions: 2}}})
	cl := client(t, b.ClientConfig())
	want := []TopicSpec{{Name: "SCP", Partitions: 2}, {Name: "NRF", Partitions: 3}, {Name: "BSF", Partitions: 1}}
	err := EnsureTopics(tctx(t, 10*time.Second), cl, want, false)
	if err == nil || !strings.Contains(err.Error(), "NRF") || !strings.Contains(err.Error(), "BSF") || strings.Contains(err.Error(), "SCP") {
		t.Fatalf("err = %v, want one naming NRF and BSF only", err)
	}
	if err := EnsureTopics(tctx(t, 10*time.Second), cl, want, true); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTopics(tctx(t, 10*time.Second), cl, want, false); err != nil {
		t.Fatalf("after create: %v", err)
	}
}

func TestKcatProducesToEmbeddedBroker(t *testing.T) {
	kcat := outside.Tool(t, "kcat")
	b := startBroker(t, Config{})
	var in bytes.Buffer
	const n = 50
	for i := range n {
		fmt.Fprintf(&in, "corr-%d:{\"version\":\"1.0.0\",\"n\":%d}\n", i, i)
	}
	ctx := tctx(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", strings.Join(b.Addrs(), ","), "-t", "SEPP", "-K", ":", "-X", "acks=all")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	got := consume(t, b.ClientConfig(), "", "SEPP", n)
	keys := map[string]bool{}
	for _, r := range got {
		keys[string(r.Key)] = true
	}
	if len(got) != n || len(keys) != n {
		t.Fatalf("got %d records with %d distinct keys, want %d", len(got), len(keys), n)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad addr", Config{Addr: "nope"}, "addr"},
		{"bad topic", Config{Addr: "127.0.0.1:0", Topics: []TopicSpec{{Name: "a b", Partitions: 1}}}, "invalid character"},
		{"zero partitions", Config{Addr: "127.0.0.1:0", Topics: []TopicSpec{{Name: "SCP"}}}, "partitions"},
		{"bad sasl", Config{Addr: "127.0.0.1:0", SASL: &SASLConfig{Mechanism: "GSSAPI", Users: map[string]string{"a": "b"}}}, "sasl mechanism"},
		{"sasl no users", Config{Addr: "127.0.0.1:0", SASL: &SASLConfig{Mechanism: MechPlain}}, "without users"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(context.Background(), tt.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want mention of %q", err, tt.want)
			}
		})
	}
	if err := (ClientConfig{Brokers: []string{"x:1"}, SASLMechanism: "FOO", Username: "u"}).Validate(); err == nil {
		t.Fatal("bad client mechanism accepted")
	}
	_, err := ClientConfig{}.NewClient()
	if err == nil || !strings.Contains(err.Error(), "no brokers") {
		t.Fatalf("empty client config: %v", err)
	}
}

// TestAdvertiseFor: a broker listening on every interface advertises the
// address other hosts reach this one at (TestRemoteNFProduces in app tries
// it from another network namespace), a specific one itself.
func TestAdvertiseFor(t *testing.T) {
	host := "127.0.0.1"
	if a, ok := hostAddr(false); ok {
		host = a.String()
		if a.IsLoopback() || !a.Is4() {
			t.Fatalf("hostAddr(false) = %s", a)
		}
	}
	host6 := host
	if a, ok := hostAddr(true); ok {
		host6 = "[" + a.String() + "]"
	}
	tests := []struct{ addr, adv, port, want string }{
		{":9092", "", "9092", host + ":9092"},
		{"0.0.0.0:0", "", "4321", host + ":4321"},
		{"[::]:9092", "", "9092", host6 + ":9092"},
		{"10.0.0.5:9092", "", "9092", "10.0.0.5:9092"},
		{":9092", "kafka.example:19092", "9092", "kafka.example:19092"},
		{":0", "kafka.example:0", "5555", "kafka.example:5555"},
	}
	for _, tt := range tests {
		if got := advertiseFor(tt.addr, tt.adv, tt.port); got != tt.want {
			t.Errorf("advertiseFor(%q,%q,%q) = %q, want %q", tt.addr, tt.adv, tt.port, got, tt.want)
		}
	}
}

// TestReaperFreesDeletedSegments: the reaper holds every segment file, so
// deleting one (here by DeleteRecords, as retention does) only removes its
// name; the reaper then closes the descriptor, which frees it.
func TestReaperFreesDeletedSegments(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, Config{DataDir: dir, Topics: []TopicSpec{{Name: "SCP", Partitions: 1,
		Configs: map[string]string{"segment.bytes": "1048576"}}}})
	cl := client(t, b.ClientConfig(), kgo.ProducerBatchMaxBytes(200_000))
	val := make([]byte, 100_000)
	_, _ = rand.Read(val) // incompressible: 4 MB, four or more 1 MiB segments
	for range 40 {
		if err := cl.ProduceSync(tctx(t, 10*time.Second), &kgo.Record{Topic: "SCP", Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := newReaper(dir, slog.New(slog.DiscardHandler))
	defer r.closeAll()
	r.reap()
	before := len(r.held)
	if before < 4 {
		t.Fatalf("reaper holds %d segment files, want 4 or more", before)
	}
	files := make(map[string]*os.File, before)
	maps.Copy(files, r.held)

	adm := kadm.NewClient(cl)
	end, err := adm.ListEndOffsets(tctx(t, 5*time.Second), "SCP")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := end.Lookup("SCP", 0)
	if _, err := adm.DeleteRecords(tctx(t, 5*time.Second), kadm.Offsets{"SCP": {0: {Topic: "SCP", Partition: 0, At: o.Offset}}}); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for path, f := range files {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			deleted = append(deleted, path)
			if linked(f) {
				t.Errorf("%s: deleted, but its descriptor says it still has a name", path)
			}
		}
	}
	if len(deleted) < before-1 {
		t.Fatalf("%d of %d segments deleted by DeleteRecords, want all but the active one", len(deleted), before)
	}
	r.reap()
	for _, path := range deleted {
		if _, ok := r.held[path]; ok {
			t.Errorf("%s: deleted but still held after a reap", path)
		}
		if err := files[path].Close(); err == nil {
			t.Errorf("%s: the reaper did not close its descriptor", path)
		}
	}
	if len(r.held) != before-len(deleted) {
		t.Errorf("reaper holds %d files after the reap, want %d", len(r.held), before-len(deleted))
	}
}
