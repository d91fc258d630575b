// Package file delivers copies (or transaction records carried as copies) to
// rotated files: a pcap of the synthetic stream, or JSON lines. A file is
// written under a hidden temporary name in the target directory, synced, and
// renamed to its final name when it is rotated, so a reader listing the
// directory never sees a half-written file.
package filesink

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
)

// Formats.
const (
	FormatPCAP  = "pcap"
	FormatJSONL = "jsonl"
)

// Config configures a Sink.
type Config struct {
	Dir    string
	Prefix string // file name prefix, e.g. the feed name
	Format string // pcap or jsonl
	// RotateBytes starts a new file once the current one holds this many
	// bytes (default 100 MiB); RotateInterval once it is this old (default
	// 5 minutes). Keep is how many finished files stay (default 100).
	RotateBytes    int64
	RotateInterval time.Duration
	Keep           int
	Mappings       []synthetic.Mapping // pcap: NF addresses
	Logger         *slog.Logger
	Now            func() time.Time
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Sink writes batches to the current file. Send returns once the batch is
// written and synced (so a committed offset's copy is on disk). It is safe for
// concurrent use; a background timer rotates idle files.
type Sink struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	f       *os.File
	tmp     string
	opened  time.Time
	size    int64
	pw      *synthetic.Writer // pcap: one per file (its encoder holds the file's flows)
	line    []byte
	closed  bool
	lastErr string
	seq     int

	stop chan struct{}
	done chan struct{}
}

// New checks cfg, creates Dir if needed, finishes any temporary file a
// previous process left (truncated to its last complete record) and starts
// the rotation timer.
func New(cfg Config) (*Sink, error) {
	if cfg.Dir == "" {
		return nil, errors.New("file sink: dir is required")
	}
	if !prefixRE.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("file sink: prefix %q: want 1-64 of A-Z a-z 0-9 . _ -", cfg.Prefix)
	}
	switch cfg.Format {
	case FormatPCAP, FormatJSONL:
	default:
		return nil, fmt.Errorf("file sink: format %q: want pcap or jsonl", cfg.Format)
	}
	if cfg.RotateBytes <= 0 {
		cfg.RotateBytes = 100 << 20
	}
	if cfg.RotateInterval <= 0 {
		cfg.RotateInterval = 5 * time.Minute
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	s := &Sink{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.recover(); err != nil {
		return nil, err
	}
	if err := s.prune(); err != nil {
		return nil, err
	}
	go s.ticker()
	return s, nil
}

func (s *Sink) ext() string { return "." + s.cfg.Format }

// tmpPrefix is the hidden name of files being written.
func (s *Sink) tmpPrefix() string { return "." + s.cfg.Prefix + "-" }

// Send writes batch to the current file, syncs it, and rotates when the file
// is full or old.
func (s *Sink) Send(_ context.Context, batch []*nfcopy.Copy) error {
	if len(batch) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("file sink: closed")
	}
	if err := s.write(batch); err != nil {
		s.lastErr = err.Error()
		return err
	}
	if s.size >= s.cfg.RotateBytes || s.cfg.Now().Sub(s.opened) >= s.cfg.RotateInterval {
		if err := s.finish(); err != nil {
			s.lastErr = err.Error()
			return err
		}
	}
	s.lastErr = ""
	return nil
}

func (s *Sink) write(batch []*nfcopy.Copy) error {
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	good := s.size
	var err error
	if s.cfg.Format == FormatPCAP {
		err = s.pw.WriteBatch(batch) // through fileCounter, which counts
	} else {
		b := s.line[:0]
		for _, c := range batch {
			b = appendLine(b, c.Raw)
		}
		s.line = b
		var n int
		n, err = s.f.Write(b)
		s.size += int64(n)
	}
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// The file may end in a torn batch: cut it back to the last good
		// size and finish it; the retry goes to a new file, whose pcap
		// encoder starts its flows afresh.
		err = fmt.Errorf("file sink %s: %w", s.tmp, err)
		if terr := s.f.Truncate(good); terr != nil {
			s.log.Error("file sink: truncate after failed write", "file", s.tmp, "err", terr)
		}
		s.size = good
		if good == 0 {
			s.f.Close()
			_ = os.Remove(s.tmp)
			s.f, s.pw = nil, nil
		} else if ferr := s.finish(); ferr != nil {
			s.log.Error("file sink: finish after failed write", "err", ferr)
		}
		return err
	}
	return nil
}

// appendLine appends raw as one JSON line (compacted if it spans lines).
func appendLine(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\n') >= 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			raw = buf.Bytes()
		} else {
			raw = bytes.ReplaceAll(raw, []byte{'\n'}, []byte{' '})
		}
	}
	return append(append(dst, raw...), '\n')
}

func (s *Sink) open() error {
	now := s.cfg.Now()
	s.seq++
	s.tmp = filepath.Join(s.cfg.Dir, fmt.Sprintf("%s%s-%d%s.tmp", s.tmpPrefix(), stamp(now), s.seq, s.ext()))
	f, err := os.OpenFile(s.tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	s.f, s.opened, s.size = f, now, 0
	if s.cfg.Format == FormatPCAP {
		s.pw = synthetic.NewWriter(&fileCounter{s: s}, synthetic.EncoderOptions{Mappings: s.cfg.Mappings})
	}
	return nil
}

// fileCounter is the pcap writer's destination: the current file, counted.
type fileCounter struct{ s *Sink }

func (fc *fileCounter) Write(p []byte) (int, error) {
	n, err := fc.s.f.Write(p)
	fc.s.size += int64(n)
	return n, err
}

func stamp(t time.Time) string { return t.UTC().Format("20060102T150405.000Z") }

// finish syncs, closes and renames the current file to its final name, then
// drops the oldest finished files beyond Keep.
func (s *Sink) finish() error {
	if s.f == nil {
		return nil
	}
	f, tmp := s.f, s.tmp
	s.f, s.pw = nil, nil
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("file sink: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("file sink: close %s: %w", tmp, err)
	}
	final := filepath.Join(s.cfg.Dir, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(tmp), "."), ".tmp"))
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	syncDir(s.cfg.Dir)
	return s.prune()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename's durability; best effort on filesystems that refuse
		d.Close()
	}
}

// Files lists the finished files, oldest first.
func (s *Sink) Files() ([]string, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("file sink: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, s.cfg.Prefix+"-") && strings.HasSuffix(n, s.ext()) {
			out = append(out, filepath.Join(s.cfg.Dir, n))
		}
	}
	// Names sort by time (fixed-width UTC stamp), then sequence.
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(sortKey(a), sortKey(b)) })
	return out, nil
}

// sortKey pads the sequence number so file 10 sorts after file 9 of the same
// millisecond.
func sortKey(p string) string {
	b := filepath.Base(p)
	i := strings.LastIndexByte(b, '-')
	j := strings.LastIndexByte(b, '.')
	if i < 0 || j < i {
		return b
	}
	return b[:i] + fmt.Sprintf("-%012s", b[i+1:j])
}

func (s *Sink) prune() error {
	files, err := s.Files()
	if err != nil {
		return err
	}
	for len(files) > s.cfg.Keep {
		if err := os.Remove(files[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("file sink: prune: %w", err)
		}
		files = files[1:]
	}
	return nil
}

// recover finishes temporary files of a previous process: their synced
// batches were acknowledged (and their offsets maybe committed), so they are
// kept, truncated to the last complete record in case the process died
// mid-write.
func (s *Sink) recover() error {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, s.tmpPrefix()) || !strings.HasSuffix(n, s.ext()+".tmp") {
			continue
		}
		p := filepath.Join(s.cfg.Dir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("file sink: recover: %w", err)
		}
		good := completeLen(b, s.cfg.Format)
		if good == 0 {
			_ = os.Remove(p)
			continue
		}
		if err := os.Truncate(p, int64(good)); err != nil {
			return fmt.Errorf("file sink: recover: %w", err)
		}
		final := filepath.Join(s.cfg.Dir, strings.TrimSuffix(strings.TrimPrefix(n, "."), ".tmp"))
		if err := os.Rename(p, final); err != nil {
			return fmt.Errorf("file sink: recover: %w", err)
		}
		s.log.Warn("file sink: finished a file left by a previous run", "file", final, "bytes", good, "dropped_bytes", len(b)-good)
	}
	return nil
}

// completeLen is how many leading bytes of b are whole records: JSON lines up
// to the last newline, or pcap records after the 24-byte global header.
func completeLen(b []byte, format string) int {
	if format == FormatJSONL {
		return bytes.LastIndexByte(b, '\n') + 1
	}
	const hdr, rec = 24, 16
	if len(b) < hdr {
		return 0
	}
	n := hdr
	for n+rec <= len(b) {
		l := int(binary.LittleEndian.Uint32(b[n+8:]))
		if n+rec+l > len(b) {
			break
		}
		n += rec + l
	}
	if n == hdr {
		return 0
	}
	return n
}

func (s *Sink) ticker() {
	defer close(s.done)
	iv := min(s.cfg.RotateInterval/4, time.Second)
	t := time.NewTicker(max(iv, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.f != nil && !s.closed && s.cfg.Now().Sub(s.opened) >= s.cfg.RotateInterval {
				if err := s.finish(); err != nil {
					s.lastErr = err.Error()
					s.log.Error("file sink: rotate", "err", err)
				}
			}
			s.mu.Unlock()
		}
	}
}

// Close finishes the current file.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.finish()
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	return err
}

// Connected reports whether the last write succeeded.
func (s *Sink) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr == ""
}

// Retries is always 0: the feed retries failed sends.
func (s *Sink) Retries() uint64 { return 0 }

// LastError is the last write error, "" after a success.
func (s *Sink) LastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}
