// Package trace is the subscriber trace on demand: for a while, every copy
// of one subscriber (SUPI/IMSI, GPSI/MSISDN or PEI, or a filter expression)
// is captured as pcap and as JSON lines, optionally from some minutes back
// in Kafka retention. A trace runs as two file feeds of the director,
// which the app adds to the stored feeds while the trace lasts; its files
// stay until the trace's retention. This package holds the model, the
// feeds a trace is, and the reading of its files for download.
package trace

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/director"
	"github.com/signalbox/signalbox/internal/datadirector/filter"
)

// Trace is one subscriber trace, as stored.
type Trace struct {
	ID string `json:"id"`
	// One identity, or a filter expression over the copies' fields.
	SUPI   string `json:"supi,omitempty"` // imsi-... (or the digits)
	GPSI   string `json:"gpsi,omitempty"` // msisdn-... (or the digits)
	PEI    string `json:"pei,omitempty"`  // imei-... / imeisv-...
	Filter string `json:"filter,omitempty"`
	// Minutes it captures for; LookbackMinutes before its start it
	// begins from (what Kafka still retains).
	Minutes         int `json:"minutes"`
	LookbackMinutes int `json:"lookback_minutes,omitempty"`
	// Who started it, and the node it captures on: the one it was
	// started on, whose group alone then reads every partition, so that a
	// response is read by the node that saw its request. Empty (a trace
	// stored before traces had a node): every node captures its share.
	CreatedBy string    `json:"created_by"`
	Node      string    `json:"node,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"` // Start + Minutes, or when it was stopped
	Stopped   bool      `json:"stopped,omitempty"`
	// MaxBytes bounds each of its two captures.
	MaxBytes int64 `json:"max_bytes"`
}

// Limits bound the traces of a node.
type Limits struct {
	MaxMinutes  int           // longest trace (default 240)
	MaxLookback int           // furthest look-back (default 60)
	MaxBytes    int64         // per capture (default 256 MiB)
	Retention   time.Duration // files kept after the end (default 24 h)
}

// WithDefaults fills the zero limits.
func (l Limits) WithDefaults() Limits {
	if l.MaxMinutes <= 0 {
		l.MaxMinutes = 240
	}
	if l.MaxLookback <= 0 {
		l.MaxLookback = 60
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 256 << 20
	}
	if l.Retention <= 0 {
		l.Retention = 24 * time.Hour
	}
	return l
}

// FieldError names the field of a trace request at fault.
type FieldError struct{ Field, Msg string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

var (
	// An IMSI is MCC, MNC and an MSIN of at least one digit: 6 to 15
	// digits (TS 23.003). Five are a PLMN, no subscriber.
	reSUPI = regexp.MustCompile(`^(imsi-)?[0-9]{6,15}$`)
	reGPSI = regexp.MustCompile(`^(msisdn-)?\+?[0-9]{5,15}$`)
	rePEI  = regexp.MustCompile(`^(imei-[0-9]{15}|imeisv-[0-9]{16}|[0-9]{15,16})$`)
)

// Prepare checks a trace request and completes it: its id, identity in
// the stored form, start, end and size bound.
func (t *Trace) Prepare(l Limits, now time.Time) error {
	l = l.WithDefaults()
	n := 0
	for _, v := range []string{t.SUPI, t.GPSI, t.PEI, t.Filter} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return &FieldError{"supi", "give exactly one of supi, gpsi, pei or filter"}
	}
	switch {
	case t.SUPI != "":
		if !reSUPI.MatchString(t.SUPI) {
			return &FieldError{"supi", fmt.Sprintf("%q: want imsi- and 6 to 15 digits, a whole IMSI (MCC, MNC and MSIN)", t.SUPI)}
		}
		if !strings.HasPrefix(t.SUPI, "imsi-") {
			t.SUPI = "imsi-" + t.SUPI
		}
	case t.GPSI != "":
		if !reGPSI.MatchString(t.GPSI) {
			return &FieldError{"gpsi", fmt.Sprintf("%q: want msisdn- and 5 to 15 digits", t.GPSI)}
		}
		if !strings.HasPrefix(t.GPSI, "msisdn-") {
			t.GPSI = "msisdn-" + strings.TrimPrefix(t.GPSI, "+")
		}
	case t.PEI != "":
		if !rePEI.MatchString(t.PEI) {
			return &FieldError{"pei", fmt.Sprintf("%q: want imei- and 15 digits or imeisv- and 16", t.PEI)}
		}
		if !strings.HasPrefix(t.PEI, "imei") {
			if len(t.PEI) == 15 {
				t.PEI = "imei-" + t.PEI
			} else {
				t.PEI = "imeisv-" + t.PEI
			}
		}
	default:
		if _, err := filter.Compile(t.Filter); err != nil {
			return &FieldError{"filter", err.Error()}
		}
	}
	if t.Minutes < 1 || t.Minutes > l.MaxMinutes {
		return &FieldError{"minutes", fmt.Sprintf("%d: want 1 to %d", t.Minutes, l.MaxMinutes)}
	}
	if t.LookbackMinutes < 0 || t.LookbackMinutes > l.MaxLookback {
		return &FieldError{"lookback_minutes", fmt.Sprintf("%d: want 0 to %d", t.LookbackMinutes, l.MaxLookback)}
	}
	if t.MaxBytes <= 0 || t.MaxBytes > l.MaxBytes {
		t.MaxBytes = l.MaxBytes
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	t.ID = "tr-" + now.UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
	t.Start = now.UTC()
	t.End = t.Start.Add(time.Duration(t.Minutes) * time.Minute)
	return nil
}

// On reports whether the trace captures on the node named node.
func (t *Trace) On(node string) bool { return t.Node == "" || t.Node == node }

// Running reports whether the trace captures at now.
func (t *Trace) Running(now time.Time) bool { return !t.Stopped && now.Before(t.End) }

// Whom is what the trace is of, for people and the audit log.
func (t *Trace) Whom() string {
	switch {
	case t.SUPI != "":
		return t.SUPI
	case t.GPSI != "":
		return t.GPSI
	case t.PEI != "":
		return t.PEI
	}
	return "filter " + t.Filter
}

// expr is the copy filter that selects the trace's copies.
func (t *Trace) expr() string {
	var e string
	switch {
	case t.SUPI != "":
		e = "supi == " + strconv.Quote(t.SUPI)
	case t.GPSI != "":
		e = "gpsi == " + strconv.Quote(t.GPSI)
	case t.PEI != "":
		e = "pei == " + strconv.Quote(t.PEI)
	default:
		e = "(" + t.Filter + ")"
	}
	if t.LookbackMinutes > 0 {
		from := t.Start.Add(-time.Duration(t.LookbackMinutes) * time.Minute).UnixNano()
		e += " && timestamp >= " + strconv.FormatInt(from, 10)
	}
	return e
}

// Dir is where a trace's files are, under base.
func Dir(base, id string) string { return filepath.Join(base, id) }

// Feeds are the two file feeds a running trace is: pcap and JSON lines of
// the sources given (the NF topics), into Dir(base, t.ID).
func (t *Trace) Feeds(base string, sources []string) []director.FeedSpec {
	off := false
	start := "latest"
	if t.LookbackMinutes > 0 {
		start = "earliest" // and the filter keeps what is recent enough
	}
	keep := 50
	var out []director.FeedSpec
	for _, format := range []string{"pcap", "jsonl"} {
		out = append(out, director.FeedSpec{Name: FeedName(t.ID, format), Type: director.TypeFile, Sources: sources,
			Start: start, Filter: t.expr(), Transactions: true, Enabled: &[]bool{!off}[0],
			File: &director.FileSpec{Dir: Dir(base, t.ID), Format: format, RotateSeconds: 2,
				RotateBytes: max(t.MaxBytes/int64(keep), 1<<20), Keep: keep}})
	}
	return out
}

// FeedName is the name of a trace's feed of a format.
func FeedName(id, format string) string { return "trace." + id + "." + format }

// IsTraceFeed reports whether a feed name is a trace's.
func IsTraceFeed(name string) bool { return strings.HasPrefix(name, "trace.") }

// files lists a trace's finished files of a format, oldest first.
func files(dir, format string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && !strings.HasPrefix(n, ".") && strings.HasSuffix(n, "."+format) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out) // prefix-<time>-<seq>: in time order
	return out, nil
}

// Size is the bytes of a trace's finished files of a format.
func Size(dir, format string) int64 {
	fs, _ := files(dir, format)
	var n int64
	for _, f := range fs {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

const pcapHeaderLen = 24

// WritePCAP writes the trace's finished pcap files as one pcap stream: the
// first file's global header, then every file's packets.
func WritePCAP(w io.Writer, dir string) error {
	n, err := writeFiles(w, dir, "pcap", pcapHeaderLen)
	if err == nil && n == 0 {
		err = writeEmptyPCAP(w)
	}
	return err
}

// WriteJSONL writes the trace's finished JSON-lines files, in order.
func WriteJSONL(w io.Writer, dir string) error {
	_, err := writeFiles(w, dir, "jsonl", 0)
	return err
}

// writeFiles copies the finished files of a format in order, each but the
// first without its first skip bytes, and says how many there were.
func writeFiles(w io.Writer, dir, format string, skip int64) (int, error) {
	fs, err := files(dir, format)
	if err != nil {
		return 0, err
	}
	for i, name := range fs {
		f, err := os.Open(name)
		if err != nil {
			return i, err
		}
		if i > 0 && skip > 0 {
			if _, err := f.Seek(skip, io.SeekStart); err != nil {
				f.Close()
				return i, err
			}
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

// writeEmptyPCAP writes a pcap global header (nanoseconds, Ethernet, as
// the synthetic encoder writes), so that a trace that has caught nothing
// yet still reads as a capture.
func writeEmptyPCAP(w io.Writer) error {
	var h [pcapHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], 1)
	_, err := w.Write(h[:])
	return err
}
