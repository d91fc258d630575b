package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files of a -tls-dir, as the bench writes them for the server it starts
// and reads them for a -target: the CA that signed both certificates, the
// server's certificate and key, and the client (CUCM) certificate and key.
const (
	tlsCAFile         = "ca.pem"
	tlsServerCertFile = "server.pem"
	tlsServerKeyFile  = "server-key.pem"
	tlsClientCertFile = "client.pem"
	tlsClientKeyFile  = "client-key.pem"
)

// writeTLSFiles makes a throwaway CA and signs with it a server certificate
// for 127.0.0.1 and localhost (RSA 2048, as CUCM's own certificates and most
// route servers' are) and a client certificate for a CallManager node,
// writing them into dir.
func writeTLSFiles(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "signalbox bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, tlsCAFile), "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, certFile), "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(filepath.Join(dir, keyFile), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	}
	if err := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, tlsServerCertFile, tlsServerKeyFile); err != nil {
		return err
	}
	return leaf(3, "cucm-sub1.example.net", x509.ExtKeyUsageClientAuth, tlsClientCertFile, tlsClientKeyFile)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// clientTLSConfig is how the load client connects, as a CUCM node with an
// https profile URI: the server's certificate verified against dir's CA for
// serverName, and with clientCert dir's client certificate presented. No
// session cache: a reconnecting node makes a full handshake.
func clientTLSConfig(dir, serverName string, clientCert bool) (*tls.Config, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, tlsCAFile))
	if err != nil {
		return nil, fmt.Errorf("-tls-dir: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("-tls-dir: " + tlsCAFile + " holds no PEM certificate")
	}
	conf := &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if clientCert {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsClientCertFile), filepath.Join(dir, tlsClientKeyFile))
		if err != nil {
			return nil, fmt.Errorf("-tls-dir: client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{c}
	}
	return conf, nil
}
