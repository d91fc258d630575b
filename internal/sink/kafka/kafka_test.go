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

	"github.com/signalbox/signalbox/internal/broker"
	"github.com/signalbox/signalbox/internal/copy"
)

func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, broker.Config{
		Addr:            "127.0.0.1:0",
		MaxMessageBytes: 64 << 10,
		Topics:          []broker.TopicSpec{{Name: "SCP", Partitions: 2}, {Name: "probe.out", Partitions: 3}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func batch(n, size int) []*copy.Copy {
	out := make([]*copy.Copy, n)
	for i := range out {
		pad := make([]byte, size)
		rand.Read(pad) // incompressible, so size is the size on the wire
		raw := fmt.Sprintf(`{"version":"1.0.0","i":%d,"pad":"%s"}`, i, base64.StdEncoding.EncodeToString(pad))
		out[i] = &copy.Copy{CorrelationID: fmt.Sprintf("corr-%d", i), Raw: []byte(raw)}
	}
	return out
}

func TestSendThenKcatConsumes(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is required: %v", err)
	}
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
		copies []*copy.Copy
		want   string
	}{
		{"unknown topic", "probe.missing", batch(1, 1), "UNKNOWN_TOPIC_OR_PARTITION"},
		{"too large", "probe.out", batch(1, 200<<10), "too large"},
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
