package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"
)

func TestReadAhead(t *testing.T) {
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		src     io.Reader
		want    []byte
		wantErr error
	}{
		{"whole stream, EOF", bytes.NewReader(data), data, io.EOF},
		{"one byte at a time", iotest.OneByteReader(bytes.NewReader(data[:5000])), data[:5000], io.EOF},
		{"data then error", io.MultiReader(bytes.NewReader(data[:70_000]), iotest.ErrReader(boom)), data[:70_000], boom},
		{"error with data", iotest.DataErrReader(bytes.NewReader(data[:100])), data[:100], io.EOF},
		{"empty", bytes.NewReader(nil), nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra := newReadAhead(tt.src, 3, 4096)
			defer ra.Close()
			var got bytes.Buffer
			buf := make([]byte, 1000)
			var err error
			for {
				var n int
				n, err = ra.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if !bytes.Equal(got.Bytes(), tt.want) {
				t.Fatalf("got %d bytes, want %d (or different content)", got.Len(), len(tt.want))
			}
		})
	}
}

// TestClosedMidRecord checks that a connection closed by the probe itself in
// the middle of a record is not counted as a bad stream.
func TestClosedMidRecord(t *testing.T) {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write(le.AppendUint32(nil, magicMicros))
	b.Write(le.AppendUint16(nil, 2))
	b.Write(le.AppendUint16(nil, 4))
	b.Write(make([]byte, 8))
	b.Write(le.AppendUint32(nil, maxRecordLen))
	b.Write(le.AppendUint32(nil, linkEthernet))
	b.Write(make([]byte, 8))           // ts
	b.Write(le.AppendUint32(nil, 100)) // incl
	b.Write(le.AppendUint32(nil, 100)) // orig
	b.Write(make([]byte, 40))          // part of the record
	s := newStats(0, "")
	err := newConnDecoder(s).run(newReadAhead(io.MultiReader(&b, iotest.ErrReader(net.ErrClosed)), 2, 1024))
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("run: %v, want net.ErrClosed", err)
	}
	if r := s.report(ModeSynthetic); r.Invalid != 0 {
		t.Fatalf("invalid %d, want 0: %v", r.Invalid, r.FirstErrors)
	}
}
