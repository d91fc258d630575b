package broker

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/testkit/pki"
)

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	ca := pki.NewCA(t, "signalbox-test-ca")
	return ca.Server(t, "127.0.0.1").TLS, ca.Pool
}

func TestTLSListener(t *testing.T) {
	cert, pool := selfSigned(t)
	b := startBroker(t, Config{
		TLS:       &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ClientTLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		SASL:      &SASLConfig{Mechanism: MechScramSHA512, Users: map[string]string{"nf": "pw"}},
	})
	cc := b.ClientConfig()
	if err := client(t, cc).ProduceSync(tctx(t, 10*time.Second), &kgo.Record{Topic: "BSF", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("SASL_SSL produce: %v", err)
	}
	if got := consume(t, cc, "", "BSF", 1); len(got) != 1 {
		t.Fatalf("consumed %d", len(got))
	}
	plain := cc
	plain.TLS = nil
	if err := client(t, plain).Ping(tctx(t, 5*time.Second)); err == nil {
		t.Fatal("plaintext client reached the TLS listener")
	}
	untrusting := cc
	untrusting.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if err := client(t, untrusting).Ping(tctx(t, 5*time.Second)); err == nil {
		t.Fatal("client without the CA accepted the broker's certificate")
	}
}
