package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server whose slowest request passed its histogram's largest bucket
// (+Inf) still gets a -json report.
func TestReportJSONWithInfiniteBound(t *testing.T) {
	r := &curriReport{Server: &serverReport{RequestP99S: 0.0005, RequestMaxS: bucketBound(math.Inf(1))}}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.writeJSONFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Server map[string]any `json:"server"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	if got.Server["request_max_s"] != "+Inf" || got.Server["request_p99_s"] != 0.0005 {
		t.Errorf("server: %v", got.Server)
	}
	if !strings.Contains(boundOf(math.Inf(1)), "> 100 ms") {
		t.Errorf("table bound %q", boundOf(math.Inf(1)))
	}
}
