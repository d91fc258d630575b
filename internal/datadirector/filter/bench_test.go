package filter

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/nfsim"
	"github.com/signalbox/signalbox/internal/testkit"
)

// examples are the filters the issue asks for, plus ones that go through the
// VM.
var examples = []struct{ name, src string }{
	{"nf_method_status", `nf_type in ["SCP","SEPP"] && method == "POST" && status >= 400`},
	{"supi_or_service", `supi == "imsi-234300000014975" || service == "nudm-ueau"`},
	{"header", `header["3gpp-sbi-target-apiroot"] != ""`},
	{"direction", `direction == "REQUEST_INGRESS"`},
	{"size", `size > 2000`},
	{"vm_matches", `path matches "^/nudm-(sdm|ueau)/"`},
}

// nfsimCopies runs the simulator into an h2c endpoint and decodes what it
// sent: 3000-byte copies of the default mix.
func nfsimCopies(t testing.TB, count int64) []nfcopy.Copy {
	t.Helper()
	var mu sync.Mutex
	var recs [][]byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole body before the lock: a blocked handler with an unread
		// body holds HTTP/2 connection window the others need.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for line := range bytes.SplitSeq(body, []byte{'\n'}) {
			if len(line) > 0 {
				recs = append(recs, line)
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	if _, err := nfsim.Run(context.Background(), nfsim.Config{Ingest: srv.URL, Count: count, Size: 3000, RunID: "f1"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := make([]nfcopy.Copy, len(recs))
	for i := range recs {
		if err := nfcopy.Decode(recs[i], &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestNfsimDifferential runs every example on simulator traffic and compares
// with the unrewritten evaluation.
func TestNfsimDifferential(t *testing.T) {
	copies := nfsimCopies(t, 600)
	extra := []string{
		`imsi startsWith "23430" && gpsi != "" || pei contains "35"`,
		`dnn == "internet" || snssai in ["1", "1-000001"]`,
		`resource contains "nf-instances" && api_version == "v1" && method in ["GET", "PUT", "PATCH"]`,
		`content_type == "application/problem+json" && status >= 400`,
		`consumer_fqdn endsWith "3gppnetwork.org" && source_port > 50000 && destination_port == 8080`,
	}
	matched := map[string]int{}
	for _, src := range append(extra, func() []string {
		var s []string
		for _, e := range examples {
			s = append(s, e.src)
		}
		return s
	}()...) {
		f, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		for i := range copies {
			got := f.Match(&copies[i])
			if got != oracle(t, src, &copies[i]) {
				t.Fatalf("%s: copy %d (%s %s) differs from the oracle", src, i, copies[i].NFType, copies[i].Direction)
			}
			if got {
				matched[src]++
			}
		}
		// A filter that matches all or nothing of mixed traffic tests little
		// (the examples may: no copy is both a POST and a 4xx).
		if slices.Contains(extra, src) && (matched[src] == 0 || matched[src] == len(copies)) {
			t.Errorf("%s matched %d of %d", src, matched[src], len(copies))
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	copies := nfsimCopies(b, 4000)
	for _, ex := range examples {
		f, err := Compile(ex.src)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(ex.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := testkit.CPUTime()
			n := 0
			for i := 0; i < b.N; i++ {
				if f.Match(&copies[i%len(copies)]) {
					n++
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "copies/s")
			testkit.ReportCPU(b, cpu0)
		})
	}
}
