package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signalbox-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
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
