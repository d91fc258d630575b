package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/broker"
	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/testkit/fixture"
)

// FuzzIngest: any body gets 200 (with every non-blank line accepted), 400 or
// 413, and a JSON answer; never a panic or a hang.
func FuzzIngest(f *testing.F) {
	ctx := context.Background()
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", Topics: testTopics}, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	cl, err := b.ClientConfig().NewClient()
	if err != nil {
		f.Fatal(err)
	}
	defer cl.Close()
	h := NewHandler(cl, Config{Topics: testTopics, MaxBodyBytes: 64 << 10, Timeout: 5 * time.Second})
	f.Add(append(append(fixture.Record("a", "SCP", nfcopy.RequestIngress), '\n'), fixture.Record("b", "NRF", nfcopy.ResponseEgress)...))
	f.Add([]byte("{\"version\":\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/copies", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d, answer not JSON: %q", rec.Code, rec.Body.Bytes())
		}
		switch rec.Code {
		case http.StatusOK:
			lines := 0
			for l := range bytes.SplitSeq(body, []byte{'\n'}) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines++
				}
			}
			if out.Accepted != lines {
				t.Fatalf("accepted %d of %d lines", out.Accepted, lines)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
	})
}
