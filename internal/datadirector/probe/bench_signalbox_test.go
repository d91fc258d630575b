package probe

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/sink/synthetic"
	"github.com/signalbox/signalbox/internal/testkit"
)

// BenchmarkSyntheticDecodeSignalbox decodes the stream signalbox's own
// synthetic sink writes (plain HPACK literals, no Huffman, no indexing) of
// copies shaped like nfsim's: every other one has no body and is padded to
// 3000 bytes by an x-signalbox-pad header, as a GET or a 204 is. ns/op is
// per pcap record.
func BenchmarkSyntheticDecodeSignalbox(b *testing.B) {
	const n = 4096
	enc := synthetic.NewEncoder(synthetic.EncoderOptions{})
	stream := enc.AppendHeader(nil)
	for i := int64(1); i <= n; i++ {
		c := testCopy("SCP", i, 3000)
		c.SourceIP, c.DestIP, c.SourcePort, c.DestPort = "10.0.0.1", "10.0.0.2", 40000, 8080
		if i%2 == 0 {
			c.Headers = append(c.Headers, nfcopy.Header{Name: "x-signalbox-pad", Values: []string{strings.Repeat("p", 2500)}})
			c.Body = nil
		}
		stream = enc.AppendCopy(stream, c)
	}
	s := newStats(0, "")
	d := newConnDecoder(s)
	r := bytes.NewReader(stream)
	if err := d.readGlobal(r); err != nil {
		b.Fatal(err)
	}
	recs := stream[len(stream)-r.Len():]
	b.SetBytes(int64(len(recs) / n))
	b.ReportAllocs()
	defer testkit.ReportCPU(b, testkit.CPUTime())
	for b.Loop() {
		if r.Len() == 0 {
			r.Reset(recs)
		}
		now := time.Now()
		feedRecord(b, d, r, now.UnixNano()-int64(time.Millisecond), now)
	}
	b.StopTimer()
	if rep := s.report(ModeSynthetic); rep.Invalid != 0 || rep.Received == 0 {
		b.Fatalf("report: %+v", rep)
	}
}
