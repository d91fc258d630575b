package synthetic

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
)

// sharedCopies is sampleCopies with odd cases added: a message of many
// segments, and one without a stream id or correlation id.
func sharedCopies() []*nfcopy.Copy {
	cs := sampleCopies()
	big := request(20, nfcopy.RequestIngress, jsonBody(150_000))
	anon := request(21, nfcopy.RequestIngress, jsonBody(30))
	anon.CorrelationID = ""
	anon.Headers = anon.Headers[:5] // no x-http2-stream-id
	return append(cs, big, anon, response(anon, nfcopy.ResponseEgress, "200", nil))
}

// TestSharedEncodingSameBytes: encoders given the copies' shared encodings
// write exactly the bytes they write without them, through flow set-ups, a
// reconnect (Reset) in the middle, copies left to the flow, and a second
// round of the same copies with the shared buffers reused.
func TestSharedEncodingSameBytes(t *testing.T) {
	maps := []Mapping{{NFFQDN: "UDM1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: netip.MustParseAddrPort("10.9.9.9:8443")}}
	for _, opts := range []EncoderOptions{{}, {Mappings: maps}, {KeepPorts: true, NoHandshake: true, MSS: 9000}} {
		cs := sharedCopies()
		plain, withShared := NewEncoder(opts), NewEncoder(opts)
		sh := newShared(opts)
		var want, got []byte
		for round := 0; round < 2; round++ {
			sh.Encode(cs)
			shared := 0
			for _, c := range cs {
				if sh.encoding(c) != nil {
					shared++
				}
			}
			if shared != len(cs) {
				t.Fatalf("%d of %d copies have a shared encoding, want all", shared, len(cs))
			}
			for i, c := range cs {
				if i == 4 {
					plain.Reset()
					withShared.Reset()
				}
				want = plain.AppendCopy(want[:0], c)
				got = withShared.AppendCopyFrom(got[:0], c, sh)
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d, copy %d: %d bytes with the shared encoding, %d without; they differ", round, i, len(got), len(want))
				}
			}
			sh.Reset()
			for _, c := range cs {
				if sh.encoding(c) != nil {
					t.Fatal("a shared encoding outlived Reset")
				}
			}
		}
	}
}

// TestSharedEncodingKeyed: an encoder with other mappings ignores a shared
// encoding made for another key and encodes the copy itself.
func TestSharedEncodingKeyed(t *testing.T) {
	maps := []Mapping{{NFFQDN: "udm1.5gc.mnc030.mcc234.3gppnetwork.org", Addr: netip.MustParseAddrPort("10.9.9.9:8443")}}
	if internKey(maps, false, DefaultMSS) != internKey(append([]Mapping(nil), maps...), false, DefaultMSS) {
		t.Fatal("equal mappings give different keys")
	}
	if internKey(maps, false, DefaultMSS) == internKey(nil, false, DefaultMSS) || internKey(nil, true, DefaultMSS) == internKey(nil, false, DefaultMSS) {
		t.Fatal("different mappings or port handling give one key")
	}
	c := sampleCopies()[0]
	sh := newShared(EncoderOptions{})
	sh.Encode([]*nfcopy.Copy{c})
	if sh.encoding(c) == nil {
		t.Fatal("no shared encoding")
	}
	mapped := NewEncoder(EncoderOptions{Mappings: maps})
	got := mapped.AppendCopyFrom(nil, c, sh)
	want := NewEncoder(EncoderOptions{Mappings: maps}).AppendCopy(nil, c)
	if !bytes.Equal(got, want) {
		t.Fatal("an encoder of another key used the shared encoding")
	}
}

// BenchmarkAppendCopyShared is BenchmarkAppendCopy for a copy encoded once
// for every feed: what each further feed pays.
func BenchmarkAppendCopyShared(b *testing.B) {
	e := NewEncoder(EncoderOptions{})
	c := request(1, nfcopy.RequestIngress, jsonBody(3000))
	sh := newShared(EncoderOptions{})
	sh.Encode([]*nfcopy.Copy{c})
	buf := e.AppendCopyFrom(nil, c, sh)
	b.ReportAllocs()
	b.SetBytes(int64(len(c.Body)))
	for b.Loop() {
		buf = e.AppendCopyFrom(buf[:0], c, sh)
	}
}

// Frame headers fall across segment boundaries at some body sizes: the
// shared path's stream ids and checksums still come out as the plain path's.
func TestSharedEncodingHeadersAcrossSegments(t *testing.T) {
	for _, mss := range []int{536, 1460} {
		opts := EncoderOptions{MSS: mss}
		plain, withShared, sh := NewEncoder(opts), NewEncoder(opts), newShared(opts)
		var want, got []byte
		for pad := 0; pad < 600; pad++ { // moves every frame header by a byte a step
			c := request(pad, nfcopy.RequestIngress, jsonBody(20000))
			c.Headers = append(c.Headers, h("x-pad", strings.Repeat("p", pad)))
			sh.Encode([]*nfcopy.Copy{c})
			want = plain.AppendCopy(want[:0], c)
			got = withShared.AppendCopyFrom(got[:0], c, sh)
			if !bytes.Equal(got, want) {
				t.Fatalf("MSS %d, pad %d: shared and plain encodings differ", mss, pad)
			}
			sh.Reset()
		}
	}
}
