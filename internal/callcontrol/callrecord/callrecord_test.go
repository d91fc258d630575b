package callrecord

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sample() Record {
	return Record{Time: time.Date(2026, 12, 2, 7, 30, 0, 123456000, time.UTC), Node: "sb1", Policy: "default",
		Calling: "9725550101", Called: "4085550199", TransformedCalling: "+19725550101", TransformedCalled: "+14085550199",
		TriggerPoint: "translationpattern", DeviceName: "SEP001122334455", Decision: "deny", Step: "rule", RuleID: 7,
		Sent: "reject reason=blocked", LatencyMicros: 84, Client: "10.0.0.5:41234"}
}

// What AppendJSON writes is what encoding/json reads back, whatever the
// strings hold (quotes, controls, non-ASCII, invalid UTF-8).
func TestAppendJSONRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te\back`, "tab\tnl\ncr\r\x01\x1f", "Zoë Ünal 日本", "bad\xffutf8\xc3", "\u2028"} {
		r := sample()
		r.Calling, r.DeviceName, r.Error = s, s, s
		b := AppendJSON(nil, &r)
		if !json.Valid(b) {
			t.Fatalf("%q: invalid JSON %s", s, b)
		}
		var back Record
		if err := Decode(b, &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		want := r
		want.Version = Version
		if s == "" {
			want.Error = ""
		}
		// Invalid UTF-8 comes back as U+FFFD, as encoding/json writes it.
		fix := func(v string) string { return strings.ToValidUTF8(v, "\ufffd") }
		want.Calling, want.DeviceName, want.Error = fix(want.Calling), fix(want.DeviceName), fix(want.Error)
		if back != want {
			t.Errorf("%q: got %+v\nwant %+v", s, back, want)
		}
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := sample()
	r.Version = Version
	mine := AppendJSON(nil, &r)
	theirs, _ := json.Marshal(&r)
	var a, b map[string]any
	_ = json.Unmarshal(mine, &a)
	_ = json.Unmarshal(theirs, &b)
	if len(a) != len(b) {
		t.Fatalf("fields differ:\n%s\n%s", mine, theirs)
	}
	for k, v := range b {
		if a[k] != v {
			t.Errorf("%s: %v, encoding/json %v", k, a[k], v)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	var r Record
	for in, want := range map[string]string{
		`not json`:             "invalid character",
		`{"metadata-list":{}}`: "no version",
		`{"version":"2.0.0","time":"2026-12-02T07:30:00Z","decision":"deny"}`: "reads 1.x",
		`{"version":"1.0.0","decision":"deny"}`:                               "no time",
		`{"version":"1.0.0","time":"2026-12-02T07:30:00Z"}`:                   "no decision",
	} {
		if err := Decode([]byte(in), &r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want %q", in, err, want)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := sample()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], &r)
	}
}

func TestMaskNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		keep int
		want string
	}{
		{"+19725550101", 4, "+xxxxxxx0101"},
		{"9725550101", 4, "xxxxxx0101"},
		{"50102", 4, "x0102"},
		{"0101", 4, "0101"},
		{"12", 4, "12"},
		{"", 4, ""},
		{"*67#9725550101", 4, "*xx#xxxxxx0101"},
		{"9725550101", 0, "9725550101"},
		{"anonymous", 4, "anonymous"},
	} {
		if got := MaskNumber(c.in, c.keep); got != c.want {
			t.Errorf("MaskNumber(%q, %d) = %q, want %q", c.in, c.keep, got, c.want)
		}
	}
	r := Record{Calling: "9725550101", Called: "50102", TransformedCalling: "+19725550101", TransformedCalled: "+14695550102"}
	r.Mask(4)
	if r.Calling != "xxxxxx0101" || r.Called != "x0102" || r.TransformedCalling != "+xxxxxxx0101" || r.TransformedCalled != "+xxxxxxx0102" {
		t.Errorf("Mask(4): %+v", r)
	}
}
