package http2sink

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

func TestSpecValidateNamesFields(t *testing.T) {
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://probe:8443/copies", true},
		{"http://probe:8080/copies", true},
		{"", false},
		{"ftp://x/y", false},
		{"https://", false},
		{"probe:8080", false},
	} {
		err := (&Spec{URL: tt.url}).Validate()
		var fe *sinkspec.FieldError
		if tt.ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || fe.Field != "url")) {
			t.Errorf("Validate(%q) = %v, want ok=%v (or a *FieldError for url)", tt.url, err, tt.ok)
		}
	}
}

func TestSpecConfigTLSOnlyForHTTPS(t *testing.T) {
	tc := &tls.Config{ServerName: "probe", MinVersion: tls.VersionTLS12}
	if c := (&Spec{URL: "https://probe:8443/x", FireAndForget: true}).Config(tc, nil); c.TLS != tc || !c.FireAndForget {
		t.Fatalf("https config = %+v, want the TLS config and fire-and-forget", c)
	}
	c := (&Spec{URL: "http://probe:8080/x"}).Config(tc, nil)
	if c.TLS != nil {
		t.Fatal("an h2c URL was given TLS settings")
	}
	if _, err := New(c); err != nil {
		t.Fatalf("an h2c feed with TLS settings in its spec does not start: %v", err)
	}
}
