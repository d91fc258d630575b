package curri

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Timeouts of the CURRI listener.
const (
	// ReadHeaderTimeout bounds the request line and headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds the whole request, so a client trickling its body
	// holds a connection for at most this long (CUCM's own routing request
	// timer is typically 2 s, after which it applies failure treatment).
	ReadTimeout = 5 * time.Second
	// WriteTimeout bounds writing the response.
	WriteTimeout = 5 * time.Second
	// IdleTimeout keeps CUCM's persistent connections open between calls;
	// CUCM probes them with HEAD (every 30 s in common configurations).
	IdleTimeout = 5 * time.Minute
	// MaxHeaderBytes: CUCM sends seven short headers.
	MaxHeaderBytes = 16 << 10
)

// NewServer returns an HTTP/1.1-only server for CUCM: persistent
// connections, bounded slow requests, errors to slog. With a non-nil tlsConf
// start it with ServeTLS(ln, "", "") (the certificates come from tlsConf);
// HTTP/2 is not offered, as CUCM speaks HTTP/1.1 only.
func NewServer(addr string, h http.Handler, tlsConf *tls.Config) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		TLSConfig:         tlsConf,
		Protocols:         &protocols,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler().WithAttrs([]slog.Attr{slog.String("component", "curri_http")}), slog.LevelWarn),
	}
}
