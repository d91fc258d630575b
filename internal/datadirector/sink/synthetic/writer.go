package synthetic

import (
	"fmt"
	"io"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// Writer writes the synthetic pcap stream to an io.Writer: with an os.File it
// produces a .pcap file that tshark and Wireshark open directly (the export
// path; rotation belongs to the caller). The global header goes out with the
// first batch. A Writer is not safe for concurrent use.
type Writer struct {
	w       io.Writer
	enc     *Encoder
	buf     []byte
	started bool
}

// NewWriter returns a Writer encoding with opts onto w.
func NewWriter(w io.Writer, opts EncoderOptions) *Writer {
	return &Writer{w: w, enc: NewEncoder(opts)}
}

// WriteBatch encodes batch and writes it with one Write call.
func (w *Writer) WriteBatch(batch []*nfcopy.Copy) error {
	b := w.buf[:0]
	if !w.started {
		b = w.enc.AppendHeader(b)
	}
	for _, c := range batch {
		b = w.enc.AppendCopy(b, c)
	}
	w.buf = b
	if len(b) == 0 {
		return nil
	}
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("synthetic: write: %w", err)
	}
	w.started = true
	return nil
}
