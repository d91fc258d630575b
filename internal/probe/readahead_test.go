package probe

import (
	"bytes"
	"errors"
	"io"
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
