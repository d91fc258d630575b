package filesink

import (
	"log/slog"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

// Spec is a file target as a feed's JSON gives it (the director's FeedSpec
// holds it under "file"): rotated files in Dir, written atomically.
type Spec struct {
	Dir           string `json:"dir"`
	Format        string `json:"format,omitempty"`         // pcap (copies' default) or jsonl (records: jsonl only)
	RotateBytes   int64  `json:"rotate_bytes,omitempty"`   // default 100 MiB
	RotateSeconds int    `json:"rotate_seconds,omitempty"` // default 300
	Keep          int    `json:"keep,omitempty"`           // finished files kept; default 100
}

// Validate returns a *sinkspec.FieldError naming the first field at fault
// (relative to the spec: "dir"). records is for a feed of transaction
// records (JSON), which are written as jsonl only.
func (s *Spec) Validate(records bool) error {
	if s.Dir == "" {
		return &sinkspec.FieldError{Field: "dir", Msg: "required"}
	}
	switch s.Format {
	case "", FormatPCAP, FormatJSONL:
	default:
		return sinkspec.Errorf("format", "%q: want pcap or jsonl", s.Format)
	}
	if records && s.Format == FormatPCAP {
		return &sinkspec.FieldError{Field: "format", Msg: "transaction records are written as jsonl"}
	}
	for _, c := range []struct {
		field string
		n     int64
	}{{"rotate_bytes", s.RotateBytes}, {"rotate_seconds", int64(s.RotateSeconds)}, {"keep", int64(s.Keep)}} {
		if c.n < 0 {
			return &sinkspec.FieldError{Field: c.field, Msg: "must not be negative"}
		}
	}
	return nil
}

// Config is the sink's configuration for s: files named after prefix (the
// feed), in format when the spec names none (pcap for copies, jsonl for
// records).
func (s *Spec) Config(prefix, format string, log *slog.Logger) Config {
	if s.Format != "" {
		format = s.Format
	}
	return Config{Dir: s.Dir, Prefix: prefix, Format: format, RotateBytes: s.RotateBytes,
		RotateInterval: time.Duration(s.RotateSeconds) * time.Second, Keep: s.Keep, Logger: log}
}
