package director

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// countingStore is a RecordStore that counts what it is given.
type countingStore struct {
	mu   sync.Mutex
	recs int
}

func (s *countingStore) Append(recs []xdr.Record, raws [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs += len(recs)
	for i := range recs {
		if raws[i] == nil {
			panic("a record handed to the store without its JSON")
		}
	}
}

func (s *countingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs
}

// Of the xdr feeds that correlate an NF type's copies, one stores the
// records: the one with the most sources, then the first by name; a
// disabled or invalid feed stores nothing, and a re-keyed feed counts by
// the sources of its re-key stage.
func TestRecordStorers(t *testing.T) {
	m := offlineManager(t)
	off := false
	file := &FileSpec{Dir: t.TempDir()}
	specs := m.expand(context.Background(), Plans([]FeedSpec{
		{Name: "b-wide", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, File: file},
		{Name: "a-wide", Type: TypeXDR, Sources: []string{"SCP", "NRF"}, File: file},
		{Name: "0-scp", Type: TypeXDR, Sources: []string{"SCP"}, File: file},
		{Name: "0-off", Type: TypeXDR, Sources: []string{"SCP", "NRF", "SEPP"}, File: file, Enabled: &off},
		{Name: "0-bad", Type: TypeXDR, Sources: []string{"SCP", "NRF", "SEPP"}}, // no output
		{Name: "c-copies", Type: TypeFile, Sources: []string{"SCP", "NRF", "SEPP"}, File: file},
		{Name: "z-sepp", Type: TypeXDR, Sources: []string{"SEPP"}, File: file, XDR: &XDRSpec{Rekey: true}},
	}))
	got := m.recordStorers(specs)
	want := map[string]string{"SCP": "a-wide", "NRF": "a-wide", "SEPP": "z-sepp"}
	if !maps.Equal(got, want) {
		t.Errorf("storers %v, want %v", got, want)
	}
}

// Two xdr feeds over the same sources, and a third over some of them,
// store each transaction once.
func TestXDRFeedsStoreEachRecordOnce(t *testing.T) {
	ctx := context.Background()
	topics := append(slices.Clone(testTopics[:3]), broker.TopicSpec{Name: "SEPP", Partitions: 2})
	br := startBroker(t, broker.Config{Topics: topics})
	const n = 3000
	st, err := nfsim.Run(ctx, nfsim.Config{Brokers: br.ClientConfig().Brokers, Count: n, Size: 500, Progress: time.Hour}, io.Discard)
	if err != nil || st.Total() != n {
		t.Fatalf("nfsim: %v, sent %d of %d", err, st.Total(), n)
	}
	store := &countingStore{}
	var m *Manager
	m, _ = runManager(t, Config{Client: br.ClientConfig(), Topics: topics, Logger: slog.New(slog.DiscardHandler), RecordStore: store,
		NewSink: func(spec *FeedSpec) (Sink, error) { return m.defaultSink(spec) }})
	all := []string{"SCP", "NRF", "SEPP"}
	var specs []FeedSpec
	for _, f := range []struct {
		name    string
		sources []string
	}{{"analytics", all}, {"probe", all}, {"scp-only", all[:1]}} {
		specs = append(specs, FeedSpec{Name: f.name, Type: TypeXDR, Sources: f.sources, Start: "earliest",
			File: &FileSpec{Dir: t.TempDir(), Format: "jsonl"}, XDR: &XDRSpec{Timeout: "500ms"}})
	}
	for i := range specs {
		if err := m.Prepare(ctx, &specs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Apply(ctx, specs); err != nil {
		t.Fatal(err)
	}
	// Until every feed has read everything and made no record for a second.
	made := map[string]uint64{}
	deadline := time.Now().Add(60 * time.Second)
	for quiet := time.Now(); time.Since(quiet) < time.Second; time.Sleep(50 * time.Millisecond) {
		for _, s := range specs {
			fs, _ := m.Status(s.Name)
			if fs.Records != made[s.Name] || fs.Lag != 0 || fs.Records == 0 {
				made[s.Name], quiet = fs.Records, time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feeds did not settle: %v records", made)
		}
	}
	t.Logf("records made %v, stored %d", made, store.count())
	if got := store.count(); got != int(made["analytics"]) {
		t.Errorf("%d records stored; the feeds made %v, and analytics' alone should be stored", got, made)
	}
}
