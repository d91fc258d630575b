package director

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
	"github.com/signalbox/signalbox/internal/testkit"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// filterCorpus produces n copies per direction to SCP and NRF: 8n copies,
// ids f-<nf>-<dir>-<i>.
func filterCorpus(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, nf := range []string{"SCP", "NRF"} {
		for _, d := range []nfcopy.Direction{nfcopy.RequestIngress, nfcopy.RequestEgress, nfcopy.ResponseIngress, nfcopy.ResponseEgress} {
			for i := range n {
				recs = append(recs, &kgo.Record{Topic: nf, Value: fixture.Record(fmt.Sprintf("f-%s-%s-%d", nf, d, i), nf, d)})
			}
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestFeedFilters(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	const n = 25 // per NF and direction: 200 copies per feed
	cases := []struct {
		name, filter   string
		matched, total uint64
	}{
		{"all", "", 0, 200}, // no filter: nothing counted, all delivered
		{"nrf", `nf_type == "NRF"`, 100, 200},
		{"responses", `status == 200`, 100, 200},
		{"scp-req-in", `nf_type == "SCP" && direction == "REQUEST_INGRESS"`, 25, 200},
		{"none", `service == "nausf-auauth"`, 0, 200},
		{"post-ueau", `method == "POST" and path startsWith "/nudm-ueau/"`, 100, 200},
	}
	rcvs := map[string]*receiver{}
	var specs []FeedSpec
	for _, c := range cases {
		r := newReceiver(t)
		rcvs[c.name] = r
		specs = append(specs, FeedSpec{Name: c.name, Type: TypeSynthetic, Sources: []string{"SCP", "NRF"}, SyntheticSpec: SyntheticSpec{Endpoint: r.addr}, Filter: c.filter})
	}
	h.apply(specs...)
	filterCorpus(t, producer(t, b), n)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := c.matched
			if c.filter == "" {
				want = c.total
			}
			testkit.WaitFor(t, 15*time.Second, "lag 0 and "+c.name+" delivered", func() bool {
				st := h.status(c.name)
				return st.Lag == 0 && st.Delivered == want && (c.filter == "" || st.Matched+st.FilteredOut == c.total)
			})
			st := h.status(c.name)
			if c.filter != "" && (st.Matched != c.matched || st.FilteredOut != c.total-c.matched) {
				t.Errorf("matched %d filtered_out %d, want %d and %d", st.Matched, st.FilteredOut, c.matched, c.total-c.matched)
			}
			if d, total := rcvs[c.name].counts(); uint64(d) != want || uint64(total) != want {
				t.Errorf("receiver got %d distinct / %d copies, want %d", d, total, want)
			}
			if c.filter != "" {
				m := testutil.ToFloat64(h.m.m.filterMatched.WithLabelValues(c.name))
				d := testutil.ToFloat64(h.m.m.filterDropped.WithLabelValues(c.name))
				if uint64(m) != c.matched || uint64(d) != c.total-c.matched {
					t.Errorf("metrics matched %v dropped %v", m, d)
				}
			}
		})
	}
}

func TestFilterRefusedWithPosition(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	for _, c := range []struct{ typ, filter, want string }{
		{TypeSynthetic, `nf_type == `, "line 1, column"},
		{TypeSynthetic, `nosuchfield == "x"`, "line 1, column 1"},
		{TypeSynthetic, `nf_type == "SCP" &&` + "\n" + `status = 3`, "line 2, column"},
		{TypeXDR, `result == 3 +`, "line 1, column"},
		{TypeXDR, `nf_type == "SCP"`, "filter"}, // a copy field, not a record field: nf_types is
	} {
		spec := FeedSpec{Name: "bad", Type: c.typ, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "127.0.0.1:9"}, KafkaSpec: KafkaSpec{Topic: "probe.out"}, Filter: c.filter}
		err := h.m.Validate(&spec)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "filter" || !strings.Contains(fe.Error(), c.want) {
			// nf_type exists for records too; only the first four must fail.
			if c.filter == `nf_type == "SCP"` && err == nil {
				continue
			}
			t.Errorf("%s %q: got %v, want a filter FieldError containing %q", c.typ, c.filter, err, c.want)
		}
	}
}

func TestValidateXDRAndFile(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	dir := t.TempDir()
	for _, c := range []struct {
		spec  FeedSpec
		field string // "" = valid
	}{
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "XDR"}}, ""},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, HTTP2Spec: HTTP2Spec{URL: "http://127.0.0.1:1/x"}}, ""},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir}}, ""},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}}, "topic"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, HTTP2Spec: HTTP2Spec{URL: "http://a:1/"}, KafkaSpec: KafkaSpec{Topic: "XDR"}}, "topic"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "NRF"}}, "topic"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, HTTP2Spec: HTTP2Spec{URL: "ftp://a/"}}, "url"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "XDR"}, XDR: &XDRSpec{Timeout: "soon"}}, "xdr.timeout"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "XDR"}, XDR: &XDRSpec{Timeout: "1s", Linger: "2s"}}, "xdr.linger"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, KafkaSpec: KafkaSpec{Topic: "XDR"}, XDR: &XDRSpec{MaxPending: -1}}, "xdr.max_pending"},
		{FeedSpec{Name: "x", Type: TypeXDR, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir, Format: "pcap"}}, "file.format"},
		{FeedSpec{Name: "x", Type: TypeFile, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir, Format: "pcap"}}, ""},
		{FeedSpec{Name: "x", Type: TypeFile, Sources: []string{"SCP"}}, "file"},
		{FeedSpec{Name: "x", Type: TypeFile, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir, Format: "csv"}}, "file.format"},
		{FeedSpec{Name: "x", Type: TypeFile, Sources: []string{"SCP"}, File: &FileSpec{Dir: ""}}, "file.dir"},
		{FeedSpec{Name: "x", Type: TypeFile, Sources: []string{"SCP"}, File: &FileSpec{Dir: dir, Keep: -1}}, "file.keep"},
		{FeedSpec{Name: "x", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "a:1"}, XDR: &XDRSpec{}}, "xdr"},
		{FeedSpec{Name: "x", Type: TypeSynthetic, Sources: []string{"SCP"}, SyntheticSpec: SyntheticSpec{Endpoint: "a:1"}, File: &FileSpec{Dir: dir}}, "file"},
	} {
		err := h.m.Validate(&c.spec)
		var fe *FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.spec, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%+v: got %v, want field %s", c.spec, err, c.field)
		}
	}
}

// sourceIDs reads every copy of the source topics: distinct correlation ids
// and copies.
func sourceIDs(t *testing.T, cc broker.ClientConfig, want int64) (map[string]int, int64) {
	t.Helper()
	cl, err := cc.NewClient(kgo.ConsumeTopics("SCP", "NRF"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := map[string]int{}
	var n int64
	var c nfcopy.Copy
	for n < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if err := nfcopy.Decode(r.Value, &c); err != nil {
				t.Errorf("nfsim copy: %v", err)
				return
			}
			ids[c.CorrelationID]++
			n++
		})
	}
	return ids, n
}

func TestXDRFeedWithNfsim(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	h.apply(FeedSpec{Name: "tx", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, KafkaSpec: KafkaSpec{Topic: "probe.out"},
		XDR: &XDRSpec{Timeout: "2s", Linger: "100ms"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const count = 3000
	st, err := nfsim.Run(ctx, nfsim.Config{Brokers: b.ClientConfig().Brokers, Mix: map[string]float64{"SCP": 3, "NRF": 1},
		Count: count, Size: 600, Progress: time.Hour}, io.Discard)
	if err != nil || st.Total() != count {
		t.Fatalf("nfsim: %v, sent %d", err, st.Total())
	}
	ids, copies := sourceIDs(t, b.ClientConfig(), count)
	if copies != count {
		t.Fatalf("read back %d copies, want %d", copies, count)
	}
	keys, total := countTopic(t, b.ClientConfig(), "probe.out", len(ids))
	if len(keys) != len(ids) || total != len(ids) {
		t.Fatalf("records: %d distinct, %d total; want one per transaction: %d", len(keys), total, len(ids))
	}
	for id := range ids {
		if keys[id] != 1 {
			t.Fatalf("transaction %s: %d records", id, keys[id])
		}
	}
	// Every copy is in exactly one record.
	cl, err := b.ClientConfig().NewClient(kgo.ConsumeTopics("probe.out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	joined, read := 0, 0
	results := map[string]int{}
	for read < total && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec xdr.Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Errorf("record JSON: %v", err)
			}
			if string(r.Key) != rec.CorrelationID {
				t.Errorf("key %q, correlation id %q", r.Key, rec.CorrelationID)
			}
			joined += rec.Copies + rec.Duplicates
			results[rec.Result]++
			read++
		})
	}
	// Every copy is joined, or counted late (it came after its
	// transaction's Timeout, e.g. under -race).
	late := 0
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "signalbox_xdr_late_copies_total" {
			for _, m := range mf.GetMetric() {
				late += int(m.GetCounter().GetValue())
			}
		}
	}
	if joined+late != count {
		t.Errorf("records join %d copies, %d late, want %d in all", joined, late, count)
	}
	if s := h.status("tx"); s.Records != uint64(len(ids)) || s.Delivered != count {
		t.Errorf("status records %d delivered copies %d, want %d and %d", s.Records, s.Delivered, len(ids), count)
	}
	// Offsets get committed once the records are out: lag reaches 0.
	testkit.WaitFor(t, 15*time.Second, "xdr feed commits", func() bool { return h.status("tx").Lag == 0 })
	if v := testutil.ToFloat64(h.m.m.records.WithLabelValues("tx")); int(v) != len(ids) {
		t.Errorf("records metric %v", v)
	}
	t.Logf("%d copies → %d records %v", count, len(ids), results)
}

func TestXDRFeedRecordFilterToFile(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	dir := t.TempDir()
	h.apply(FeedSpec{Name: "tx-nrf", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, Filter: `"NRF" in nf_types`,
		File: &FileSpec{Dir: dir, RotateSeconds: 1}, XDR: &XDRSpec{Timeout: "500ms"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcl := producer(t, b)
	// 20 transactions seen by the NRF alone, 30 by the SCP alone.
	var recs []*kgo.Record
	for i := range 50 {
		nf := "SCP"
		if i < 20 {
			nf = "NRF"
		}
		id := fmt.Sprintf("t-%d", i)
		recs = append(recs, &kgo.Record{Topic: nf, Value: fixture.Record(id, nf, nfcopy.RequestIngress)},
			&kgo.Record{Topic: nf, Value: fixture.Record(id, nf, nfcopy.ResponseEgress)})
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "50 records filtered", func() bool { s := h.status("tx-nrf"); return s.Matched+s.FilteredOut == 50 })
	s := h.status("tx-nrf")
	if s.Matched != 20 || s.FilteredOut != 30 || s.Records != 20 {
		t.Fatalf("matched %d filtered_out %d records %d; want 20, 30, 20", s.Matched, s.FilteredOut, s.Records)
	}
	// Rotation (1 s) finishes the file; read the records back.
	var lines []string
	testkit.WaitFor(t, 30*time.Second, "a finished jsonl file", func() bool {
		lines = lines[:0]
		files, _ := filepath.Glob(filepath.Join(dir, "tx-nrf-*.jsonl"))
		for _, f := range files {
			lines = append(lines, readLines(t, f)...)
		}
		return len(lines) == 20
	})
	for _, l := range lines {
		var r xdr.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Result != xdr.ResultComplete || !strings.HasPrefix(r.CorrelationID, "t-") {
			t.Errorf("record %s: %v", l, err)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestExport(t *testing.T) {
	b := startBroker(t, broker.Config{})
	h := newHarness(t, b)
	pcl := producer(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Three windows of copies with explicit Kafka timestamps.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for w := range 3 {
		for i := range 40 {
			nf := "SCP"
			if i%4 == 0 {
				nf = "NRF"
			}
			d := nfcopy.RequestIngress
			if i%2 == 1 {
				d = nfcopy.ResponseEgress
			}
			recs = append(recs, &kgo.Record{Topic: nf, Timestamp: base.Add(time.Duration(w)*time.Minute + time.Duration(i)*time.Millisecond),
				Value: fixture.Record(fmt.Sprintf("e%d-%d", w, i), nf, d)})
		}
	}
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ids := func(q ExportQuery) map[string]bool {
		t.Helper()
		var buf bytes.Buffer
		st, err := h.m.Export(ctx, q, &buf)
		if err != nil {
			t.Fatalf("export %+v: %v", q, err)
		}
		out := map[string]bool{}
		var c nfcopy.Copy
		for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			if err := nfcopy.Decode([]byte(l), &c); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if out[c.CorrelationID] {
				t.Errorf("%s exported twice", c.CorrelationID)
			}
			out[c.CorrelationID] = true
		}
		if int(st.Matched) != len(out) {
			t.Errorf("stats matched %d, lines %d", st.Matched, len(out))
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    ExportQuery
		want int
		pick func(w, i int) bool
	}{
		{"all", ExportQuery{}, 120, func(int, int) bool { return true }},
		{"window 1", ExportQuery{Since: base.Add(time.Minute), Until: base.Add(2 * time.Minute)}, 40, func(w, _ int) bool { return w == 1 }},
		{"window 1 responses", ExportQuery{Since: base.Add(time.Minute), Until: base.Add(2 * time.Minute), Filter: `direction == "RESPONSE_EGRESS"`}, 20,
			func(w, i int) bool { return w == 1 && i%2 == 1 }},
		{"NRF from window 1", ExportQuery{Since: base.Add(time.Minute), Sources: []string{"NRF"}}, 20, func(w, i int) bool { return w >= 1 && i%4 == 0 }},
		{"empty range", ExportQuery{Since: base.Add(-time.Hour), Until: base.Add(-time.Minute)}, 0, func(int, int) bool { return false }},
	} {
		got := ids(c.q)
		if len(got) != c.want {
			t.Errorf("%s: %d copies, want %d", c.name, len(got), c.want)
		}
		for w := range 3 {
			for i := range 40 {
				if id := fmt.Sprintf("e%d-%d", w, i); got[id] != c.pick(w, i) {
					t.Errorf("%s: %s exported=%v", c.name, id, got[id])
				}
			}
		}
	}
	// Bad queries and a range no longer retained.
	var fe *FieldError
	for _, q := range []ExportQuery{{Format: "csv"}, {Sources: []string{"AMF"}}, {Filter: "status =="}, {Since: base, Until: base}} {
		if _, err := h.m.Export(ctx, q, io.Discard); !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a FieldError", q, err)
		}
	}
	adm := kadm.NewClient(pcl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "NRF", Partition: 0, At: 1})
	offs.Add(kadm.Offset{Topic: "NRF", Partition: 1, At: 1})
	if _, err := adm.DeleteRecords(ctx, offs); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err := h.m.Export(ctx, ExportQuery{Since: base.Add(-time.Minute)}, &buf)
	if !IsNotRetained(err) || buf.Len() != 0 {
		t.Errorf("since before the log start: %v (wrote %d bytes), want NotRetainedError and no output", err, buf.Len())
	}
	// From window 1 on, everything is retained.
	if got := ids(ExportQuery{Since: base.Add(time.Minute)}); len(got) != 80 {
		t.Errorf("after deletion, window 1-2: %d", len(got))
	}
}

// With Transactions, a copy read a poll (or more) before the copy that
// starts its transaction goes with it when the feed reads behind live
// traffic (a trace's look-back over a backlog, whose partitions are read
// unevenly); live, only the poll's own copies are followed, and nothing is
// kept. Kept copies are bounded: filtered out once evicted.
func TestTransactionsFollowAcrossPolls(t *testing.T) {
	m := offlineManager(t)
	f := m.newFeed(runPlan{FeedSpec: FeedSpec{Name: "tr", Type: TypeSynthetic, Filter: `direction == "REQUEST_INGRESS"`, Transactions: true}})
	copyOf := func(id string, dir nfcopy.Direction, age time.Duration) *nfcopy.Copy {
		c := new(nfcopy.Copy)
		if err := nfcopy.Decode(fixture.Record(id, "SCP", dir), c); err != nil {
			t.Fatal(err)
		}
		c.Timestamp = time.Now().Add(-age).UnixNano()
		return c
	}
	req := func(id string, age time.Duration) *nfcopy.Copy { return copyOf(id, nfcopy.RequestIngress, age) }
	resp := func(id string, age time.Duration) *nfcopy.Copy { return copyOf(id, nfcopy.ResponseEgress, age) }
	// poll runs one poll's copies through the filter as decode does and
	// returns what the feed is handed.
	poll := func(cs ...*nfcopy.Copy) string {
		b := &pollBatch{}
		for _, c := range cs {
			ok, held := f.pass(c)
			switch {
			case held:
				b.held = append(b.held, c)
			case ok:
				b.batch = append(b.batch, c)
			}
		}
		f.followHeld(b)
		var out []string
		for _, c := range b.batch {
			out = append(out, c.CorrelationID+"/"+c.Direction.String())
		}
		return strings.Join(out, " ")
	}
	behind := time.Minute
	for i, c := range []struct{ got, want string }{
		{poll(resp("a", behind), req("x", behind)), "x/REQUEST_INGRESS"},
		{poll(resp("b", behind)), ""},
		{poll(req("a", behind), req("b", behind)), "a/REQUEST_INGRESS b/REQUEST_INGRESS a/RESPONSE_EGRESS b/RESPONSE_EGRESS"},
		{poll(resp("c", 0)), ""}, // live: not kept
		{poll(req("c", 0)), "c/REQUEST_INGRESS"},
		{poll(resp("d", 0), req("d", 0)), "d/REQUEST_INGRESS d/RESPONSE_EGRESS"}, // the same poll, live or not
	} {
		if c.got != c.want {
			t.Errorf("poll %d: handed %q, want %q", i, c.got, c.want)
		}
	}
	if st := f.status(); st.Matched != 8 || st.FilteredOut != 1 {
		t.Errorf("matched %d, filtered out %d; want 8 and 1 (the live response read before its request)", st.Matched, st.FilteredOut)
	}

	// Bounded: past orphanMax the oldest kept copies are filtered out.
	for i := range orphanMax + 10 {
		poll(resp(fmt.Sprintf("o%d", i), behind))
	}
	if got := poll(req("o0", behind), req(fmt.Sprintf("o%d", orphanMax+9), behind)); !strings.HasSuffix(got, "/RESPONSE_EGRESS") || strings.Contains(got, "o0/RESPONSE") {
		t.Errorf("after %d kept: handed %q, want the newest response followed and the evicted oldest not", orphanMax+10, got)
	}
	if st := f.status(); st.FilteredOut != 1+10 {
		t.Errorf("filtered out %d, want 11: the 10 evicted", st.FilteredOut)
	}
}

// BenchmarkTransactionsFollowBehind: what a Transactions feed (a trace)
// pays per copy its filter does not pass while it reads behind live
// traffic (kept: a clone of the 3 KB copy, evicting the oldest past
// orphanMax), against live (filtered out).
func BenchmarkTransactionsFollowBehind(b *testing.B) {
	for _, age := range []time.Duration{0, time.Minute} {
		b.Run(map[time.Duration]string{0: "live", time.Minute: "behind"}[age], func(b *testing.B) {
			f := offlineManager(b).newFeed(runPlan{FeedSpec: FeedSpec{Name: "tr", Type: TypeSynthetic, Filter: `supi == "imsi-234300000000001"`, Transactions: true}})
			raw := nfcopy.AppendJSON(nil, &nfcopy.Copy{Version: "1.0.0", CorrelationID: "c", Timestamp: time.Now().UnixNano(), Direction: nfcopy.ResponseEgress, NFType: "SCP", HopByHopID: "1",
				Headers: []nfcopy.Header{{Name: ":status", Values: []string{"200"}}}, Body: bytes.Repeat([]byte("x"), 3000)})
			c := new(nfcopy.Copy)
			if err := nfcopy.Decode(raw, c); err != nil {
				b.Fatal(err)
			}
			c.Timestamp = time.Now().Add(-age).UnixNano()
			ids := make([]string, 8192)
			for i := range ids {
				ids[i] = "c" + strconv.Itoa(i)
			}
			pb := &pollBatch{}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.CorrelationID = ids[i%len(ids)]
				if _, held := f.pass(c); !held {
					b.Fatal("not held")
				}
				pb.held = append(pb.held[:0], c)
				f.followHeld(pb)
			}
		})
	}
}
