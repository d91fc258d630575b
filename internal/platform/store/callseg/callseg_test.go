package callseg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// randomCalls makes n records with times spread over span from base, numbers
// drawn from a small pool so searches hit several segments.
func randomCalls(r *rand.Rand, n int, base time.Time, span time.Duration) []Record {
	decisions := []string{"permit", "deny", "divert", "indeterminate", "weird"}
	policies := []string{"default", "sales", "ü-policy", ""}
	num := func() string {
		if r.IntN(5) == 0 {
			return ""
		}
		return fmt.Sprintf("+4930%04d", r.IntN(50))
	}
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{
			Time:   base.Add(time.Duration(r.Int64N(int64(span)))).Truncate(time.Microsecond),
			Policy: policies[r.IntN(len(policies))], Calling: num(), Called: num(),
			TransformedCalling: num(), TransformedCalled: num(), TriggerPoint: "translationpattern",
			DeviceName: fmt.Sprintf("SEP%012d", r.IntN(3)), Decision: decisions[r.IntN(len(decisions))],
			Step: "rule", RuleID: r.Int64N(1 << 40), EntryID: -r.Int64N(3), LatencyMicros: r.Int64N(5000),
			Client: "10.1.2.3:5060",
		}
		if r.IntN(3) == 0 {
			out[i].Form, out[i].Sent = "transformed_calling", "reject reason=blocked"
		}
		if r.IntN(4) == 0 {
			out[i].Error = "curri: malformed: truncated"
		}
	}
	return out
}

// Segments written before Form, Sent and Error existed (version 1) still
// decode, with those fields empty.
func TestSegmentVersion1Decodes(t *testing.T) {
	recs := randomCalls(rand.New(rand.NewPCG(7, 8)), 30, time.Unix(1e9, 0), time.Minute)
	b := []byte{1, 0}
	b = binary.AppendUvarint(b, uint64(len(recs)))
	prevT := int64(0)
	for i := range recs {
		c := &recs[i]
		c.Form, c.Sent, c.Error = "", "", ""
		t := c.Time.UnixMicro()
		b = binary.AppendUvarint(b, 1)
		b = binary.AppendVarint(b, t-prevT)
		prevT = t
		strs := c.strs()
		for _, s := range strs[:v1Strs] {
			b = binary.AppendUvarint(b, uint64(len(*s)))
			b = append(b, *s...)
		}
		b = binary.AppendVarint(b, c.RuleID)
		b = binary.AppendVarint(b, c.EntryID)
		b = binary.AppendVarint(b, c.LatencyMicros)
	}
	i := 0
	err := Decode(1, b, func(id int64, c Record) bool {
		want := recs[i]
		want.ID, want.Time = id, want.Time.UTC()
		if c != want {
			t.Fatalf("record %d: %+v\nwant %+v", i, c, want)
		}
		i++
		return true
	})
	if err != nil || i != len(recs) {
		t.Fatalf("decoded %d of %d: %v", i, len(recs), err)
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	recs := randomCalls(r, 3000, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour)
	seg := Encode(recs, nil)
	if seg.Count != len(recs) {
		t.Fatalf("count %d", seg.Count)
	}
	var got []Record
	if err := Decode(7, seg.Data, func(id int64, c Record) bool {
		got = append(got, c)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		want := recs[i]
		want.ID = 7<<IDShift | int64(i)
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want)
		}
		if want.Time.UnixMicro() < seg.MinTime || want.Time.UnixMicro() > seg.MaxTime {
			t.Fatalf("record %d outside the segment's time range", i)
		}
		if seg.Decisions&DecisionBit(want.Decision) == 0 {
			t.Fatalf("decision %q missing from the mask", want.Decision)
		}
		f := Bloom{Bits: seg.Filter}
		for _, n := range []string{want.Calling, want.Called, want.TransformedCalling, want.TransformedCalled} {
			if n != "" && !f.MayContain(n) {
				t.Fatalf("bloom filter lost %q", n)
			}
		}
	}
	t.Logf("3000 records: %d bytes compressed (%.1f per record), filter %d bytes", len(seg.Data),
		float64(len(seg.Data))/3000, len(seg.Filter))

	// trimming keeps the survivors' IDs
	ng, dropped, err := Trim(7, seg.Data, func(c *Record) bool { return c.Decision == "deny" })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = Decode(7, ng.Data, func(id int64, c Record) bool {
		if c.Decision != "deny" || !reflect.DeepEqual(c, got[id&(MaxRecords-1)]) {
			t.Fatalf("trimmed record %d: %+v", id, c)
		}
		n++
		return true
	})
	if n+dropped != 3000 || n != ng.Count {
		t.Errorf("trim kept %d (count %d), dropped %d", n, ng.Count, dropped)
	}
}

func TestBloomFalsePositives(t *testing.T) {
	f := newBloom(20000)
	for i := range 20000 {
		f.add(fmt.Sprintf("+1972555%05d", i))
	}
	fp := 0
	for i := range 100000 {
		if f.MayContain(fmt.Sprintf("+4420%07d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / 100000; rate > 0.03 {
		t.Errorf("false positive rate %.3f, want about 0.01", rate)
	}
}

func TestSegmentCorruptIsAnError(t *testing.T) {
	recs := randomCalls(rand.New(rand.NewPCG(3, 4)), 50, time.Unix(0, 0), time.Minute)
	data := Encode(recs, nil).Data
	raw := append([]byte{segVersion, 0}, mustRaw(t, data)...)
	for _, bad := range [][]byte{nil, {9, 1}, data[:len(data)/2], raw[:len(raw)-3], append(raw[:len(raw):len(raw)], 1)} {
		if err := Decode(1, bad, func(int64, Record) bool { return true }); err == nil {
			t.Errorf("corrupt segment of %d bytes decoded without error", len(bad))
		}
	}
}

// mustRaw returns a segment's uncompressed record bytes.
func mustRaw(t testing.TB, data []byte) []byte {
	b, err := zdec().DecodeAll(data[2:], nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeSegment: no input panics or loops; what decodes re-encodes to
// the same records.
func FuzzDecodeSegment(f *testing.F) {
	recs := randomCalls(rand.New(rand.NewPCG(5, 6)), 20, time.Unix(1e9, 0), time.Minute)
	data := Encode(recs, nil).Data
	f.Add(data)
	f.Add(append([]byte{segVersion, 0}, mustRaw(f, data)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []Record
		var idx []int
		if err := Decode(3, b, func(id int64, c Record) bool {
			got = append(got, c)
			idx = append(idx, int(id&(MaxRecords-1)))
			return true
		}); err != nil {
			return
		}
		var again []Record
		if err := Decode(3, Encode(got, idx).Data, func(_ int64, c Record) bool {
			again = append(again, c)
			return true
		}); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded segment differs: %v", err)
		}
	})
}

// BenchmarkEncodeSegment5000: the call log writer's CPU per batch (one
// default batch of 5,000 calls); ns/op ÷ 5000 is the cost per logged call.
func BenchmarkEncodeSegment5000(b *testing.B) {
	recs := randomCalls(rand.New(rand.NewPCG(9, 9)), 5000, time.Unix(2e9, 0), time.Second)
	b.ReportAllocs()
	for b.Loop() {
		Encode(recs, nil)
	}
}

func BenchmarkDecodeSegment5000(b *testing.B) {
	recs := randomCalls(rand.New(rand.NewPCG(9, 9)), 5000, time.Unix(2e9, 0), time.Second)
	data := Encode(recs, nil).Data
	b.ReportAllocs()
	for b.Loop() {
		_ = Decode(1, data, func(int64, Record) bool { return true })
	}
}

func TestFit(t *testing.T) {
	big := Record{Calling: string(make([]byte, 1<<20))}
	recs := make([]Record, 40)
	for i := range recs {
		recs[i] = big
	}
	if n := Fit(recs); n != 15 {
		t.Errorf("Fit of 40 1-MiB records = %d, want 15 (16 MiB per segment)", n)
	}
	if n := Fit(make([]Record, MaxRecords+10)); n != MaxRecords {
		t.Errorf("Fit of %d small records = %d, want %d", MaxRecords+10, n, MaxRecords)
	}
	if n := Fit([]Record{{Calling: string(make([]byte, 20<<20))}}); n != 1 {
		t.Errorf("Fit of one oversized record = %d, want 1", n)
	}
}
