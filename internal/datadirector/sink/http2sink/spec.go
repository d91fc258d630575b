package http2sink

import (
	"crypto/tls"
	"log/slog"
	"strings"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

// Spec is an http2 feed's part of the feed's JSON (the director's FeedSpec
// embeds it; an xdr feed posting its records uses URL).
type Spec struct {
	URL           string `json:"url,omitempty"`
	FireAndForget bool   `json:"fire_and_forget,omitempty"`
}

// Validate returns a *sinkspec.FieldError naming the first field at fault.
func (s *Spec) Validate() error {
	if err := sinkspec.HTTPURL(s.URL); err != nil {
		return &sinkspec.FieldError{Field: "url", Msg: err.Error()}
	}
	return nil
}

// Config is the sink's configuration for s, connecting with tc for an
// https:// URL (an h2c URL takes none); the rest take their defaults.
func (s *Spec) Config(tc *tls.Config, log *slog.Logger) Config {
	if !strings.HasPrefix(s.URL, "https:") {
		tc = nil // New refuses TLS settings on an h2c URL
	}
	return Config{URL: s.URL, TLS: tc, FireAndForget: s.FireAndForget, Logger: log}
}
