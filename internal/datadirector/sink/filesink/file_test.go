package filesink

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit"
)

func testCopy(i int) *nfcopy.Copy {
	c := &nfcopy.Copy{
		Version: "1.0.0", CorrelationID: "c-" + strconv.Itoa(i), Timestamp: time.Now().UnixNano(),
		Direction: nfcopy.RequestIngress, NFType: "SCP", NFFQDN: "scp1.example.org", ProducerFQDN: "udm1.example.org",
		HopByHopID: "1", SourceIP: "10.0.0.1", DestIP: "10.0.0.2", SourcePort: 40000, DestPort: 8080,
		Headers: []nfcopy.Header{{Name: ":method", Values: []string{"POST"}}, {Name: ":path", Values: []string{"/nudm-ueau/v1/x"}}},
		Body:    []byte(`{"n":` + strconv.Itoa(i) + `}`),
	}
	c.Raw = nfcopy.AppendJSON(nil, c)
	return c
}

// pcapRecords counts the records of a pcap file, failing on a torn one.
func pcapRecords(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: %d bytes, no pcap header", path, len(b))
	}
	n, off := 0, 24
	for off < len(b) {
		if off+16 > len(b) {
			t.Fatalf("%s: torn record header at %d", path, off)
		}
		off += 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		n++
	}
	if off != len(b) {
		t.Fatalf("%s: torn record at the end", path)
	}
	return n
}

func TestRotationKeepAndTshark(t *testing.T) {
	tshark := testkit.Tool(t, "tshark")
	for _, format := range []string{FormatPCAP, FormatJSONL} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			s, err := New(Config{Dir: dir, Prefix: "feed1", Format: format, RotateBytes: 8 << 10, RotateInterval: time.Hour, Keep: 3})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			sent := 0
			for b := range 20 {
				var batch []*nfcopy.Copy
				for i := range 10 {
					batch = append(batch, testCopy(b*10+i))
				}
				if err := s.Send(ctx, batch); err != nil {
					t.Fatal(err)
				}
				sent += len(batch)
				// Readers never see a half-written file: every
				// visible file is complete.
				files, _ := s.Files()
				for _, f := range files {
					if format == FormatPCAP {
						pcapRecords(t, f)
					} else if b, _ := os.ReadFile(f); len(b) == 0 || b[len(b)-1] != '\n' {
						t.Fatalf("%s: incomplete", f)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := s.Files()
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 3 {
				t.Fatalf("%d files kept, want 3: %v", len(files), files)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) != 0 {
				t.Errorf("temporary files left after Close: %v", left)
			}
			for _, f := range files {
				st, _ := os.Stat(f)
				if format == FormatJSONL {
					continue
				}
				if st.Size() > 8<<10+20_000 {
					t.Errorf("%s: %d bytes, rotation at 8 KiB", f, st.Size())
				}
				n := pcapRecords(t, f)
				out, err := exec.Command(tshark, "-n", "-r", f, "-T", "fields", "-e", "frame.number").Output()
				if err != nil {
					t.Fatalf("tshark %s: %v\n%s", f, err, out)
				}
				if got := len(strings.Fields(string(out))); got != n {
					t.Errorf("%s: tshark read %d frames, file has %d records", f, got, n)
				}
				// Only stdout: a warning on stderr is not a decoded frame.
				out, err = exec.Command(tshark, "-n", "-r", f, "-Y", "http2.header.value == \"/nudm-ueau/v1/x\"", "-T", "fields", "-e", "frame.number").Output()
				frames := strings.Fields(string(out))
				if err != nil || len(frames) == 0 {
					t.Errorf("tshark finds no HTTP/2 request with the copy's :path in %s: %v %s", f, err, out)
				}
				for _, fr := range frames {
					if _, err := strconv.Atoi(fr); err != nil {
						t.Errorf("tshark printed %q where a frame number belongs", fr)
					}
				}
			}
			t.Logf("%s: %d copies, %d files kept: %v", format, sent, len(files), files)
		})
	}
}

func TestTimeRotationAndRecovery(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Dir: dir, Prefix: "f", Format: FormatJSONL, RotateInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), []*nfcopy.Copy{testCopy(1), testCopy(2)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ := s.Files()
		if len(files) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle file was not rotated by time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A previous process died mid-write: its temporary files are finished,
	// cut to their last complete record; an empty one is removed.
	for _, c := range []struct {
		format, name string
		data         []byte
		want         int
	}{
		{FormatJSONL, ".g-1.jsonl.tmp", []byte("{\"a\":1}\n{\"a\":2}\n{\"a\""), 16},
		{FormatJSONL, ".h-1.jsonl.tmp", []byte("{\"a\""), -1},
	} {
		if err := os.WriteFile(filepath.Join(dir, c.name), c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		prefix := strings.TrimPrefix(strings.SplitN(c.name, "-", 2)[0], ".")
		s, err := New(Config{Dir: dir, Prefix: prefix, Format: c.format})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		final := filepath.Join(dir, strings.TrimSuffix(strings.TrimPrefix(c.name, "."), ".tmp"))
		st, err := os.Stat(final)
		switch {
		case c.want < 0 && err == nil:
			t.Errorf("%s: empty recovery kept", c.name)
		case c.want >= 0 && (err != nil || st.Size() != int64(c.want)):
			t.Errorf("%s: recovered %v %v, want %d bytes", c.name, st, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, c.name)); err == nil {
			t.Errorf("%s still there", c.name)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{{Prefix: "a", Format: FormatPCAP}, {Dir: dir, Prefix: "a/b", Format: FormatPCAP}, {Dir: dir, Prefix: "a", Format: "csv"}} {
		if _, err := New(c); err == nil || !strings.HasPrefix(err.Error(), "file sink: ") {
			t.Errorf("%+v: %v, want a file sink error", c, err)
		}
	}
}
