package kafkasink

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/kafkatest"
)

func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	return kafkatest.StartBroker(t, broker.Config{
		MaxMessageBytes: 64 << 10,
		Topics:          []broker.TopicSpec{{Name: "SCP", Partitions: 2}, {Name: "probe.out", Partitions: 3}},
	})
}

func batch(n, size int) []*nfcopy.Copy {
	out := make([]*nfcopy.Copy, n)
	for i := range out {
		pad := make([]byte, size)
		rand.Read(pad) // incompressible, so size is the size on the wire
		raw := fmt.Sprintf(`{"version":"1.0.0","i":%d,"pad":"%s"}`, i, base64.StdEncoding.EncodeToString(pad))
		out[i] = &nfcopy.Copy{CorrelationID: fmt.Sprintf("corr-%d", i), Raw: []byte(raw)}
	}
	return out
}

func TestSendThenKcatConsumes(t *testing.T) {
	kcat := testkit.Tool(t, "kcat")
	b := startBroker(t)
	s, err := New(Config{Client: b.ClientConfig(), Topic: "probe.out"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 200
	if err := s.Send(ctx, batch(n, 10)); err != nil {
		t.Fatalf("send: %v", err)
	}
	if !s.Connected() {
		t.Error("not connected after a successful send")
	}
	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", strings.Join(b.Addrs(), ","), "-t", "probe.out",
		"-o", "beginning", "-e", "-q", "-f", "%k|%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat read %d records, want %d", len(lines), n)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "|")
		var i int
		if _, err := fmt.Sscanf(v, `{"version":"1.0.0","i":%d`, &i); err != nil || k != fmt.Sprintf("corr-%d", i) {
			t.Fatalf("record %q: key does not match its copy", l)
		}
		seen[k] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records, want %d", len(seen), n)
	}
}

func TestSendErrors(t *testing.T) {
	b := startBroker(t)
	tests := []struct {
		name   string
		topic  string
		copies []*nfcopy.Copy
		want   string
	}{
		{"unknown topic", "probe.missing", batch(1, 1), "UNKNOWN_TOPIC_OR_PARTITION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{Client: b.ClientConfig(), Topic: tt.topic})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = s.Send(ctx, tt.copies)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want mention of %q", err, tt.want)
			}
			if s.Connected() || s.Retries() != 1 || s.LastError() == "" {
				t.Errorf("status after failure: connected=%v retries=%d last=%q", s.Connected(), s.Retries(), s.LastError())
			}
		})
	}
	if _, err := New(Config{Client: b.ClientConfig(), Topic: "bad topic"}); err == nil {
		t.Error("invalid topic name accepted")
	}
}

// newProbeOutSink starts a broker and a sink to its probe.out topic, with a
// context for the test's sends.
func newProbeOutSink(t *testing.T) (*broker.Broker, *Sink, context.Context) {
	t.Helper()
	b := startBroker(t)
	s, err := New(Config{Client: b.ClientConfig(), Topic: "probe.out"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return b, s, ctx
}

// confirmWithin polls Confirmed(t) as the feed does until it is true or fails.
func confirmWithin(t *testing.T, s *Sink, ticket uint64, d time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := s.Confirmed(ticket)
		if err != nil || ok {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("ticket %d not confirmed after %v", ticket, d)
	return nil
}

func TestWritePipelined(t *testing.T) {
	b, s, ctx := newProbeOutSink(t)
	var tickets []uint64
	for range 3 { // three batches in flight at once
		tk, err := s.Write(ctx, batch(100, 10))
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if !(tickets[0] < tickets[1] && tickets[1] < tickets[2]) {
		t.Fatalf("tickets %v do not grow", tickets)
	}
	if err := confirmWithin(t, s, tickets[2], 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tickets { // confirming the last confirmed the earlier ones
		if ok, err := s.Confirmed(tk); !ok || err != nil {
			t.Errorf("ticket %d: confirmed=%v err=%v", tk, ok, err)
		}
	}
	if !s.Connected() {
		t.Error("not connected after confirmed writes")
	}
	kafkatest.NewReader(t, b.ClientConfig(), []string{"probe.out"}).Read(300, 20*time.Second)
}

// A record the broker can never take does not fail its batch: it is set
// aside (Rejected, once) with the reason, and the rest of the batch, and the
// batches after it, confirm. Nothing is produced twice.
func TestTooLargeRecordsSetAside(t *testing.T) {
	b, s, ctx := newProbeOutSink(t)
	mixed := batch(5, 10)
	big := batch(1, 200<<10)[0]
	mixed = append(mixed[:2:2], append([]*nfcopy.Copy{big}, mixed[2:]...)...)
	tk, err := s.Write(ctx, mixed)
	if err != nil {
		t.Fatal(err)
	}
	if err := confirmWithin(t, s, tk, 20*time.Second); err != nil {
		t.Fatalf("a batch with a too-large record: %v", err)
	}
	rej, why := s.Rejected()
	if len(rej) != 1 || rej[0] != big || len(why) != 1 || !strings.Contains(why[0], "too large") {
		t.Fatalf("rejected %d copies %q, want the big one", len(rej), why)
	}
	if rej, _ := s.Rejected(); len(rej) != 0 {
		t.Fatal("Rejected returned the copy twice")
	}
	if err := s.Send(ctx, append(batch(3, 10), big)); err != nil {
		t.Fatalf("Send with a too-large record: %v", err)
	}
	if rej, _ := s.Rejected(); len(rej) != 1 {
		t.Fatalf("Send rejected %d, want 1", len(rej))
	}
	if !s.Connected() {
		t.Error("a set-aside record marked the sink disconnected")
	}
	r := kafkatest.NewReader(t, b.ClientConfig(), []string{"probe.out"})
	r.Read(8, 20*time.Second)
	r.None(500 * time.Millisecond)
}
