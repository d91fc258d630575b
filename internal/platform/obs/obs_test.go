package obs

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadiness(t *testing.T) {
	h := NewHealth()
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ReadyHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get(); code != 503 {
		t.Fatalf("empty health ready: %d", code)
	}
	h.Pending("store", "opening")
	h.Pending("curri", "listening")
	h.Ready("store")
	if code, body := get(); code != 503 || !strings.Contains(body, "curri: listening") {
		t.Fatalf("got %d %q", code, body)
	}
	h.Ready("curri")
	if code, _ := get(); code != 200 {
		t.Fatalf("all ready: %d", code)
	}
	h.Pending("store", "unreachable")
	if code, _ := get(); code != 503 {
		t.Fatalf("store down still ready: %d", code)
	}
}

func TestRegistry(t *testing.T) {
	reg := NewRegistry("v1.2.3")
	rec := httptest.NewRecorder()
	MetricsHandler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `signalbox_build_info{version="v1.2.3"} 1`) {
		t.Fatal("build info missing")
	}
}
