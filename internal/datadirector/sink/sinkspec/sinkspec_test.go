package sinkspec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/signalbox/signalbox/internal/testkit/pki"
)

func TestTLSConfigNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pki.NewCA(t, "sinkspec test CA")
	caFile := ca.File(t, dir, "ca")
	cert, key := ca.Client(t, "signalbox").Files(t, dir, "client")
	for _, tt := range []struct {
		name  string
		tls   *TLS
		field string
	}{
		{"nil", nil, ""},
		{"disabled ignores files", &TLS{CAFile: garbage}, ""},
		{"ca missing", &TLS{Enabled: true, CAFile: filepath.Join(dir, "nope.pem")}, "tls.ca_file"},
		{"ca garbage", &TLS{Enabled: true, CAFile: garbage}, "tls.ca_file"},
		{"key without cert", &TLS{Enabled: true, KeyFile: key}, "tls.cert_file"},
		{"cert without key", &TLS{Enabled: true, CertFile: cert}, "tls.key_file"},
		{"key missing", &TLS{Enabled: true, CertFile: cert, KeyFile: filepath.Join(dir, "nope.key")}, "tls.key_file"},
		{"bad pair", &TLS{Enabled: true, CertFile: garbage, KeyFile: garbage}, "tls.cert_file"},
		{"valid", &TLS{Enabled: true, CAFile: caFile, CertFile: cert, KeyFile: key, ServerName: "probe"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.tls.Config("tls")
			if got := FieldOf(err); got != tt.field {
				t.Fatalf("field = %q (%v), want %q", got, err, tt.field)
			}
			if tt.name == "valid" && (c == nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "probe") {
				t.Fatalf("config = %+v: want the CA, one certificate and the server name", c)
			}
			if tt.field == "" && tt.name != "valid" && c != nil {
				t.Fatalf("config = %+v, want nil for TLS that is off", c)
			}
		})
	}
}

func TestAddressChecks(t *testing.T) {
	for _, s := range []string{"probe:5000", "10.0.0.1:1", "[::1]:65535"} {
		if err := HostPort(s); err != nil {
			t.Errorf("HostPort(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"probe", ":5000", "probe:0", "probe:70000", "probe:http"} {
		if HostPort(s) == nil {
			t.Errorf("HostPort(%q) accepted", s)
		}
	}
	for _, s := range []string{"http://probe:8080/x", "https://probe/"} {
		if err := HTTPURL(s); err != nil {
			t.Errorf("HTTPURL(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "ftp://probe/x", "https://", "probe:8080"} {
		if HTTPURL(s) == nil {
			t.Errorf("HTTPURL(%q) accepted", s)
		}
	}
	if got := FieldOf(Within("file", &FieldError{Field: "dir", Msg: "required"})); got != "file.dir" {
		t.Errorf("Within = %q, want file.dir", got)
	}
	if plain := errors.New("x"); Within("file", plain) != plain || FieldOf(plain) != "?" {
		t.Error("Within changed an error that names no field, or FieldOf found a field in it")
	}
}
