package probe

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// appendFrame appends an HTTP/2 frame header and payload.
func appendFrame(b []byte, typ http2.FrameType, flags http2.Flags, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(typ), byte(flags))
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

// FuzzNextFrame checks the probe's in-place frame reader against
// x/net/http2's Framer on the frame types a synthetic stream carries: both
// accept or both refuse a frame, and agree on its payload.
func FuzzNextFrame(f *testing.F) {
	f.Add(appendFrame(nil, http2.FrameData, http2.FlagDataEndStream, 1, []byte("body")))
	f.Add(appendFrame(nil, http2.FrameData, http2.FlagDataPadded, 1, []byte{2, 'a', 'b', 0, 0}))
	f.Add(appendFrame(nil, http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPriority|http2.FlagHeadersPadded, 3,
		[]byte{1, 0, 0, 0, 1, 16, 0x82, 0}))
	f.Add(appendFrame(nil, http2.FrameSettings, 0, 0, []byte{0, 4, 0, 0, 0xff, 0xff}))
	f.Add(appendFrame(nil, http2.FrameSettings, http2.FlagSettingsAck, 0, nil))
	f.Add(appendFrame(nil, http2.FramePing, 0, 0, make([]byte, 8)))
	f.Add(appendFrame(nil, http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 0, 1}))
	f.Add(appendFrame(nil, http2.FrameData, 0, 0, nil))
	f.Add([]byte{0, 0, 9, 0, 0, 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) >= 4 && http2.FrameType(p[3]) == http2.FrameContinuation {
			return // the Framer refuses CONTINUATION without its HEADERS; packet() checks that order itself
		}
		got, rest, err := nextFrame(p)
		fr := http2.NewFramer(io.Discard, bytes.NewReader(p))
		fr.SetMaxReadFrameSize(maxRecordLen)
		want, werr := fr.ReadFrame()
		if len(p) >= 4 {
			switch http2.FrameType(p[3]) {
			case http2.FrameData, http2.FrameHeaders, http2.FrameSettings, http2.FramePing, http2.FrameWindowUpdate:
			default:
				return // refused by packet() whatever their content
			}
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("nextFrame error %v, Framer error %v", err, werr)
		}
		if err != nil {
			return
		}
		if len(rest) != len(p)-9-int(want.Header().Length) {
			t.Fatalf("rest %d bytes, frame of %d in %d", len(rest), want.Header().Length, len(p))
		}
		if got.typ != want.Header().Type || got.flags != want.Header().Flags || got.stream != want.Header().StreamID {
			t.Fatalf("header %v %v %d, Framer %+v", got.typ, got.flags, got.stream, want.Header())
		}
		var payload []byte
		switch w := want.(type) {
		case *http2.DataFrame:
			payload = w.Data()
		case *http2.HeadersFrame:
			payload = w.HeaderBlockFragment()
		default:
			return
		}
		if !bytes.Equal(got.data, payload) {
			t.Fatalf("payload %x, Framer %x", got.data, payload)
		}
	})
}

// A copy whose HEADERS carries END_STREAM and whose header block ends in a
// CONTINUATION frame is whole (RFC 9113 §8.1).
func TestHeadersEndStreamWithContinuation(t *testing.T) {
	var buf bytes.Buffer
	sw := newStreamWriter(t, &buf)
	sw.preface()
	c := testCopy("SCP", 1, 0)
	sw.hbuf.Reset()
	for _, h := range c.Headers {
		for _, v := range h.Values {
			_ = sw.enc.WriteField(hpack.HeaderField{Name: h.Name, Value: v})
		}
	}
	block := sw.hbuf.Bytes()
	var p []byte
	p = appendFrame(p, http2.FrameHeaders, http2.FlagHeadersEndStream, 1, block[:3])
	p = appendFrame(p, http2.FrameContinuation, http2.FlagContinuationEndHeaders, 1, block[3:])
	sw.packet(p, time.Now(), false)
	s := newStats(0, "")
	if err := newConnDecoder(s).run(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r := s.report(ModeSynthetic); r.Unique != 1 || r.Invalid != 0 {
		t.Fatalf("report %+v", r)
	}
}
