package http2sink

import (
	"crypto/tls"
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
		want := "url"
		if tt.ok {
			want = ""
		}
		if err := (&Spec{URL: tt.url}).Validate(); sinkspec.FieldOf(err) != want {
			t.Errorf("Validate(%q) = %v, want a *FieldError for %q", tt.url, err, want)
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
