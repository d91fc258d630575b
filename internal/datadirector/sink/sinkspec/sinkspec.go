// Package sinkspec holds what every sink's part of a feed spec shares: the
// error that names the field at fault, client-side TLS settings, and the
// checks of an address or a URL. Each sink package declares its own part of
// the feed's JSON (a Spec), checks it (Validate) and builds its Config from
// it; the director's FeedSpec embeds those parts.
package sinkspec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
)

// FieldError is a feed validation error naming the offending field, as the
// feed's JSON spells it ("kafka.brokers[0]").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// FieldOf is the field err names: "" for nil, "?" for an error that names
// none (or names one without saying what is wrong with it).
func FieldOf(err error) string {
	if err == nil {
		return ""
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Msg == "" {
		return "?"
	}
	return fe.Field
}

// Errorf is a FieldError for field with a formatted message.
func Errorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Within names err's field inside the object at prefix ("file" makes "dir"
// "file.dir"); other errors pass as they are.
func Within(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: prefix + "." + fe.Field, Msg: fe.Msg}
	}
	return err
}

// HostPort checks a host:port address.
func HostPort(s string) error {
	h, p, err := net.SplitHostPort(s)
	if err != nil || h == "" {
		return fmt.Errorf("%q: want host:port", s)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be 1-65535", s)
	}
	return nil
}

// HTTPURL checks an http:// or https:// URL with a host.
func HTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	}
	return nil
}

// TLS is client-side TLS for a feed's connection.
type TLS struct {
	Enabled            bool   `json:"enabled"`
	CAFile             string `json:"ca_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Config builds the client TLS config t describes, naming (as field + ".…")
// any file that cannot be read or parsed; nil or disabled gives nil. It
// reads the files, so validating with it also catches unreadable ones.
func (t *TLS) Config(field string) (*tls.Config, error) {
	if t == nil || !t.Enabled {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // operator's explicit choice
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &FieldError{Field: field + ".ca_file", Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Field: field + ".ca_file", Msg: fmt.Sprintf("%s: no PEM certificate found", t.CAFile)}
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		f := field + ".key_file"
		if t.CertFile == "" {
			f = field + ".cert_file"
		}
		return nil, &FieldError{Field: f, Msg: "cert_file and key_file go together"}
	}
	if t.CertFile != "" {
		if _, err := os.Stat(t.CertFile); err != nil {
			return nil, &FieldError{Field: field + ".cert_file", Msg: err.Error()}
		}
		if _, err := os.Stat(t.KeyFile); err != nil {
			return nil, &FieldError{Field: field + ".key_file", Msg: err.Error()}
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &FieldError{Field: field + ".cert_file", Msg: err.Error()}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
