package filesink

import (
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/datadirector/sink/sinkspec"
)

func TestSpecValidateNamesFields(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spec    Spec
		records bool
		field   string
	}{
		{"valid pcap", Spec{Dir: "/d", Format: FormatPCAP}, false, ""},
		{"valid default", Spec{Dir: "/d"}, true, ""},
		{"valid records", Spec{Dir: "/d", Format: FormatJSONL, RotateBytes: 1, RotateSeconds: 1, Keep: 1}, true, ""},
		{"dir", Spec{}, false, "dir"},
		{"format", Spec{Dir: "/d", Format: "csv"}, false, "format"},
		{"records as pcap", Spec{Dir: "/d", Format: FormatPCAP}, true, "format"},
		{"rotate bytes", Spec{Dir: "/d", RotateBytes: -1}, false, "rotate_bytes"},
		{"rotate seconds", Spec{Dir: "/d", RotateSeconds: -1}, false, "rotate_seconds"},
		{"keep", Spec{Dir: "/d", Keep: -1}, false, "keep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(tt.records); sinkspec.FieldOf(err) != tt.field {
				t.Fatalf("err = %v, want a *FieldError for %q", err, tt.field)
			}
		})
	}
}

func TestSpecConfigFormat(t *testing.T) {
	s := Spec{Dir: "/d", RotateBytes: 10, RotateSeconds: 60, Keep: 3}
	c := s.Config("probe", FormatPCAP, nil)
	if c.Format != FormatPCAP || c.Prefix != "probe" || c.RotateInterval != time.Minute || c.RotateBytes != 10 || c.Keep != 3 {
		t.Fatalf("config = %+v", c)
	}
	s.Format = FormatJSONL
	if c := s.Config("probe", FormatPCAP, nil); c.Format != FormatJSONL {
		t.Fatalf("the spec's format %q gave %q", s.Format, c.Format)
	}
}
