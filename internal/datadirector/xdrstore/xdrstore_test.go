package xdrstore

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/testkit"
)

func rec(i int, t0 time.Time) xdr.Record {
	r := xdr.Record{CorrelationID: fmt.Sprintf("corr-%d", i), Service: "nudm-ueau", Method: "POST",
		Path:   "/nudm-ueau/v1/imsi-2343000000" + fmt.Sprintf("%05d", i%1000) + "/security-information/generate-auth-data",
		Status: 200, SUPI: fmt.Sprintf("imsi-2343000000%05d", i%1000), GPSI: fmt.Sprintf("msisdn-4477009%05d", i%1000),
		Start: t0.Add(time.Duration(i) * time.Millisecond).UnixNano(), Result: xdr.ResultComplete, Copies: 4,
		Hops: []xdr.Hop{{NFType: "SCP", NFFQDN: "scp1", Direction: "REQUEST_INGRESS"}}}
	r.End = r.Start + 5e6
	if i%10 == 0 {
		r.Status, r.Cause = 404, "USER_NOT_FOUND"
	}
	return r
}

func TestStoreAndSearch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, SegmentRecords: 500})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t0 := time.Now().Add(-time.Hour)
	var recs []xdr.Record
	for i := range 5000 {
		recs = append(recs, rec(i, t0))
	}
	s.Append(recs, nil)
	cancel()
	<-done // the queue is written at the end

	// Reopened, from the files.
	s2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.segs) != 10 {
		t.Fatalf("%d segments, want 10", len(s2.segs))
	}
	got, err := s2.Search(context.Background(), Query{SUPI: "imsi-234300000000007", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("%d records of the SUPI, want 5", len(got))
	}
	var prev int64 = 1 << 62
	for _, g := range got {
		var r xdr.Record
		_ = json.Unmarshal(g, &r)
		if r.SUPI != "imsi-234300000000007" || r.End > prev {
			t.Errorf("record %+v (not the SUPI, or not newest first)", r)
		}
		prev = r.End
	}
	for _, c := range []struct {
		q    Query
		want int
	}{
		{Query{GPSI: "msisdn-447700900010", Limit: 100}, 5},
		{Query{CorrelationID: "corr-4242"}, 1},
		{Query{Cause: "USER_NOT_FOUND", Limit: 1000}, 500},
		{Query{Status: 404, SUPI: "imsi-234300000000010"}, 5},
		{Query{Service: "nudm-ueau", Since: t0.Add(4990 * time.Millisecond), Limit: 1000}, 15}, // ends 5 ms after start
		{Query{SUPI: "imsi-999"}, 0},
	} {
		got, err := s2.Search(context.Background(), c.q)
		if err != nil || len(got) != c.want {
			t.Errorf("Search(%+v) = %d records, %v; want %d", c.q, len(got), err, c.want)
		}
	}
	// Retention by size keeps the newest.
	n := len(s2.segs) // the newest three segments' size: their sizes differ a little
	s2.cfg.MaxBytes = s2.segs[n-1].size + s2.segs[n-2].size + s2.segs[n-3].size
	s2.prune(time.Now())
	if len(s2.segs) != 3 {
		t.Errorf("%d segments after pruning to 3 segments' size", len(s2.segs))
	}
	if got, _ := s2.Search(context.Background(), Query{CorrelationID: "corr-4999"}); len(got) != 1 {
		t.Error("the newest record was pruned")
	}
	// A full queue drops, counted.
	s3, _ := Open(Config{Dir: t.TempDir(), Queue: 10})
	s3.Append(recs[:25], nil)
	if n := len(s3.pending); n != 10 {
		t.Errorf("%d queued with a queue of 10", n)
	}
}

// Searching 10,000,000 stored records by SUPI (the bound: 200 ms).
// The store is built once (a few minutes): run with
// go test -run '^$' -bench SearchBySUPI10M -benchtime 20x ./internal/datadirector/xdrstore/
func BenchmarkSearchBySUPI10M(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Config{Dir: dir, SegmentRecords: 4096})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-24 * time.Hour)
	const total = 10_000_000
	batch := make([]xdr.Record, 0, 4096)
	for i := range total {
		r := rec(i, t0)
		// A million subscribers, each in about ten records spread over the day.
		r.SUPI = fmt.Sprintf("imsi-23430%010d", (i*7919)%1_000_000)
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			if err := s.write(entries(batch)); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var size int64
	for _, sg := range s.segs {
		size += sg.size
	}
	b.Logf("%d records in %d segments, %.0f MB", total, len(s.segs), float64(size)/1e6)
	cpu := testkit.CPUTime()
	b.ResetTimer()
	found := 0
	for i := 0; b.Loop(); i++ {
		supi := fmt.Sprintf("imsi-23430%010d", (i*104729)%1_000_000)
		got, err := s.Search(context.Background(), Query{SUPI: supi, Limit: 100})
		if err != nil {
			b.Fatal(err)
		}
		found += len(got)
	}
	testkit.ReportCPU(b, cpu)
	b.ReportMetric(float64(found)/float64(b.N), "records/search")
}

// What storing costs per record (the Bloom filter, compression, the file),
// against what an xdr feed spends per record. The records come encoded, as
// the xdr feeds hand them over (they encode each once, for their output and
// the store).
func BenchmarkWrite(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), SegmentRecords: 4096})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	batch := make([]xdr.Record, 4096)
	for i := range batch {
		batch[i] = rec(i, t0)
	}
	es := entries(batch)
	cpu := testkit.CPUTime()
	b.ResetTimer()
	for b.Loop() {
		if err := s.write(es); err != nil {
			b.Fatal(err)
		}
	}
	testkit.ReportCPU(b, cpu)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}

// entries are recs as Append queues them.
func entries(recs []xdr.Record) []entry {
	out := make([]entry, len(recs))
	for i := range recs {
		raw, err := json.Marshal(&recs[i])
		if err != nil {
			panic(err)
		}
		out[i] = newEntry(&recs[i], raw)
	}
	return out
}

// The Bloom filter's hash is 64-bit FNV-1a, as segments written before it
// was inlined were made with hash/fnv: their filters still answer.
func TestBloomHashIsFNV1a(t *testing.T) {
	for _, k := range []string{"", "imsi-234300000000001", "msisdn-447700900123", "corr-ü-1"} {
		h := fnv.New64a()
		h.Write([]byte(k))
		v := h.Sum64()
		a, b := uint32(v), uint32(v>>32)
		got := bloomPositions(k, 40960)
		for i := range got {
			if want := int((a + uint32(i)*b) % 40960); got[i] != want {
				t.Fatalf("%q: position %d = %d, want %d", k, i, got[i], want)
			}
		}
	}
}

// Segments written before the codec was named (zstd, no codec in the
// header) are still read and searched next to S2 and zstd ones.
func TestReadsZstdSegments(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	old := []xdr.Record{rec(1, t0), rec(2, t0)}
	sg := &segment{Count: len(old), MinEnd: old[0].End, MaxEnd: old[1].End}
	sg.Bloom = make([]byte, bloomBits(len(old))/8)
	var body []byte
	for i := range old {
		for _, k := range []string{old[i].SUPI, old[i].GPSI, old[i].CorrelationID} {
			for _, p := range bloomPositions(k, len(sg.Bloom)*8) {
				sg.Bloom[p/8] |= 1 << (p % 8)
			}
		}
		raw, _ := json.Marshal(&old[i])
		body = append(append(body, raw...), '\n')
	}
	hdr, _ := json.Marshal(sg)
	if strings.Contains(string(hdr), "codec") {
		t.Fatalf("an old header has no codec: %s", hdr)
	}
	enc, _ := zstd.NewWriter(nil)
	file := enc.EncodeAll(body, append(hdr, '\n'))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d-%06d.xdrs", sg.MaxEnd, 1)), file, 0o640); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.write(entries([]xdr.Record{rec(3, t0)})); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"corr-1", "corr-2", "corr-3"} {
		if got, err := s.Search(context.Background(), Query{CorrelationID: id}); err != nil || len(got) != 1 {
			t.Errorf("%s: %d records, %v", id, len(got), err)
		}
	}
	if s.segs[len(s.segs)-1].Codec != codecS2 {
		t.Errorf("a new segment's codec is %q", s.segs[len(s.segs)-1].Codec)
	}
	// Written with zstd when configured, and read back from the files.
	z, err := Open(Config{Dir: dir, Codec: "zstd"})
	if err != nil {
		t.Fatal(err)
	}
	if err := z.write(entries([]xdr.Record{rec(4, t0)})); err != nil {
		t.Fatal(err)
	}
	z, _ = Open(Config{Dir: dir})
	codecs := map[string]int{}
	for _, sg := range z.segs {
		codecs[sg.Codec]++
	}
	if codecs[""] != 1 || codecs[codecS2] != 1 || codecs[codecZstd] != 1 {
		t.Errorf("segments by codec %v, want one of each", codecs)
	}
	for _, id := range []string{"corr-1", "corr-3", "corr-4"} {
		if got, err := z.Search(context.Background(), Query{CorrelationID: id}); err != nil || len(got) != 1 {
			t.Errorf("%s: %d records, %v", id, len(got), err)
		}
	}
	if _, err := Open(Config{Dir: dir, Codec: "lz4"}); err == nil || !strings.Contains(err.Error(), `codec "lz4"`) {
		t.Errorf("an unknown codec: %v", err)
	}
}
