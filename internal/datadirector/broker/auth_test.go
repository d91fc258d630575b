package broker

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/testkit/outside"
)

// authBroker is a broker on which every client authenticates (as clients
// from other hosts do), with an NF credential and a consumer credential.
func authBroker(t *testing.T, anon Anonymous) (*Broker, ClientConfig, ClientConfig, ClientConfig) {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Topics: []TopicSpec{{Name: "SCP", Partitions: 2}, {Name: "OUT", Partitions: 1}},
		Registerer: prometheus.NewRegistry(), Anonymous: anon,
		Users: []User{
			{Name: "admin", Password: "admin-pw", Role: RoleAdmin},
			{Name: "nf", Password: "nf-pw", Role: RoleProducer, Topics: []string{"SCP"}},
			{Name: "lake", Password: "lake-pw", Role: RoleConsumer, Topics: []string{"OUT"}, GroupPrefix: "lake"},
		}}
	logs := &syncBuffer{}
	b, err := Start(tctx(t, 20*time.Second), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		if t.Failed() {
			t.Logf("broker log:\n%s", logs.String())
		}
	})
	as := func(user, pw string) ClientConfig {
		return ClientConfig{Brokers: []string{b.ListenAddr()}, SASLMechanism: MechScramSHA512, Username: user, Password: pw}
	}
	return b, as("admin", "admin-pw"), as("nf", "nf-pw"), as("lake", "lake-pw")
}

// TestCredentialsDoTheirJobOnly: a client that does not authenticate is
// refused; the NF credential produces to the NF topics and nothing else
// (no reading, no admin request: each refused with Kafka's authorization
// error, and nothing changed); the consumer credential reads its topic with
// its own groups, and nothing else. Each refusal is counted.
func TestCredentialsDoTheirJobOnly(t *testing.T) {
	b, admin, nf, lake := authBroker(t, AnonymousNone)
	ctx := tctx(t, 60*time.Second)

	// No credential.
	anon := ClientConfig{Brokers: []string{b.ListenAddr()}}
	if err := client(t, anon).ProduceSync(tctx(t, 5*time.Second), &kgo.Record{Topic: "SCP", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a client without a credential produced")
	}
	if refused(b, RefusedUnauthenticated) == 0 {
		t.Error("the anonymous client's refusal was not counted")
	}

	// The NF credential produces to SCP...
	nfc := client(t, nf)
	for i := range 5 {
		if err := nfc.ProduceSync(ctx, &kgo.Record{Topic: "SCP", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("nf produces to SCP: %v", err)
		}
	}
	// ...and nothing else.
	if err := client(t, nf, kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Topic: "OUT", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("nf produces to OUT: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	rd := client(t, nf, kgo.ConsumeTopics("SCP"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	fs := rd.PollFetches(fctx)
	cancel()
	if fs.NumRecords() > 0 {
		t.Errorf("nf read %d copies", fs.NumRecords())
	}
	nfAdm := kadm.NewClient(nfc)
	if resp, err := nfAdm.DeleteTopics(ctx, "SCP"); err == nil && resp["SCP"].Err == nil {
		t.Error("nf deleted topic SCP")
	}
	if resp, err := nfAdm.DeleteRecords(ctx, kadm.Offsets{"SCP": {0: {At: 3}}}); err == nil {
		resp.Each(func(r kadm.DeleteRecordsResponse) {
			if r.Err == nil {
				t.Errorf("nf deleted records of SCP/%d", r.Partition)
			}
		})
	}
	if _, err := nfAdm.CreateTopic(ctx, 1, 1, nil, "NEW"); err == nil {
		t.Error("nf created a topic")
	}
	if resp, err := nfAdm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "evil", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "x"}}); err == nil {
		for _, r := range resp {
			if r.Err == nil {
				t.Error("nf created a SCRAM user")
			}
		}
	}
	// Nothing changed: five copies in SCP, no topic NEW.
	adm := kadm.NewClient(client(t, admin))
	ends, err := adm.ListEndOffsets(ctx, "SCP")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == "SCP" {
			total += o.Offset
		}
	})
	starts, _ := adm.ListStartOffsets(ctx, "SCP")
	starts.Each(func(o kadm.ListedOffset) { total -= o.Offset })
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if total != 5 || topics.Has("NEW") || !topics.Has("SCP") {
		t.Errorf("after nf's attempts: %d copies in SCP (want 5), topics %v", total, topics.Names())
	}

	// The consumer credential reads OUT with its own group...
	if err := client(t, admin).ProduceSync(ctx, &kgo.Record{Topic: "OUT", Value: []byte("out")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lc := client(t, lake, kgo.ConsumeTopics("OUT"), kgo.ConsumerGroup("lake-analytics"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got == 0 && ctx.Err() == nil {
		fs := lc.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("lake reads %s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	if err := lc.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("lake commits: %v", err)
	}
	// ...not SCP, nor with another's group, nor produce.
	other := client(t, lake, kgo.ConsumeTopics("OUT"), kgo.ConsumerGroup("signalbox-feed-lake"))
	fctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	fs = other.PollFetches(fctx)
	cancel()
	if fs.NumRecords() > 0 {
		t.Error("lake read with another's group")
	}
	if err := client(t, lake, kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Topic: "OUT", Value: []byte("x")}).FirstErr(); err == nil {
		t.Error("lake produced")
	}
	sc := client(t, lake, kgo.ConsumeTopics("SCP"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	fs = sc.PollFetches(fctx)
	cancel()
	if fs.NumRecords() > 0 {
		t.Error("lake read SCP")
	}
	if refused(b, RefusedDenied) < 5 {
		t.Errorf("denied requests counted %v, want each", refused(b, RefusedDenied))
	}
}

// TestLocalClientWithACredential: on this host clients need no credential,
// but one that authenticates all the same (an NF configured with its
// credential) is its user, with its user's rights.
func TestLocalClientWithACredential(t *testing.T) {
	b, _, nf, _ := authBroker(t, AnonymousLocal)
	ctx := tctx(t, 30*time.Second)
	anon := ClientConfig{Brokers: []string{b.ListenAddr()}}
	if err := client(t, anon).ProduceSync(ctx, &kgo.Record{Topic: "OUT", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("an anonymous client on this host: %v", err)
	}
	if err := client(t, nf).ProduceSync(ctx, &kgo.Record{Topic: "SCP", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("nf on this host: %v", err)
	}
	if err := client(t, nf, kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Topic: "OUT", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("nf on this host produces to OUT: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	bad := nf
	bad.Password = "wrong"
	if err := client(t, bad).Ping(ctx); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("a wrong password on this host: %v", err)
	}
}

// TestKcatWithTheNFCredential: librdkafka (kcat) produces with SCRAM-SHA-512
// as the NF credential, and is refused without it.
func TestKcatWithTheNFCredential(t *testing.T) {
	kcat := outside.Tool(t, "kcat")
	b, _, _, _ := authBroker(t, AnonymousNone)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", b.ListenAddr()}, args...)...)
		cmd.Stdin = strings.NewReader("k1:v1\nk2:v2\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("-P", "-t", "SCP", "-K", ":", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=nf", "-X", "sasl.password=nf-pw", "-X", "acks=all"); err != nil {
		t.Fatalf("kcat as nf: %v\n%s", err, out)
	}
	if out, err := run("-P", "-t", "SCP", "-K", ":", "-X", "message.timeout.ms=3000"); err == nil {
		t.Errorf("kcat without a credential produced:\n%s", out)
	}
	if out, err := run("-C", "-t", "SCP", "-o", "beginning", "-e", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=nf", "-X", "sasl.password=nf-pw"); err == nil && strings.Contains(out, "v1") {
		t.Errorf("kcat as nf read the copies:\n%s", out)
	}
}
