package store

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

var matchCases = []callpolicy.Match{
	{},
	{Called: "prefix:0900"},
	{Calling: "regex:^\\+49(30|40)\\d+$", TransformedCalled: "pattern:9.1XXX", TriggerPoint: "ingress", DeviceName: "SEP001122334455"},
	{Calling: `quote " and <html> & ünïcode`, Called: "tab\there"},
	{TransformedCalling: "x", TransformedCalled: "y"},
}

// The direct encoder writes exactly what encoding/json writes, and the
// direct decoder reads it back (or falls back) to the same value.
func TestMatchJSON(t *testing.T) {
	for _, m := range matchCases {
		got, err := encodeMatch(&m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(m)
		if got != string(want) {
			t.Errorf("encode %+v:\n got %s\nwant %s", m, got, want)
		}
		var back callpolicy.Match
		if err := decodeMatch([]byte(got), &back); err != nil || back != m {
			t.Errorf("decode %s = %+v, %v; want %+v", got, back, err, m)
		}
	}
	// PostgreSQL's jsonb hands back its own spacing and key order.
	var m callpolicy.Match
	if err := decodeMatch([]byte(`{"called": "1", "calling": "2"}`), &m); err != nil || m != (callpolicy.Match{Calling: "2", Called: "1"}) {
		t.Errorf("jsonb form: %+v, %v", m, err)
	}
	if err := decodeMatch([]byte(`{"called":"1"`), &m); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestActionMemo(t *testing.T) {
	var c ruleCodec
	a1 := callpolicy.Action{Decision: "divert", Modify: &callpolicy.Modify{}}
	a2 := callpolicy.Action{Decision: "divert"}
	e1, _ := c.encode(&callpolicy.Rule{Action: a1})
	e2, _ := c.encode(&callpolicy.Rule{Action: a2})
	if e1.action == e2.action {
		t.Errorf("zero Modify and no Modify encode alike: %s", e1.action)
	}
	var x, y callpolicy.Action
	raw := []byte(`{"decision":"permit","modify":{"calling_number":"1"}}`)
	if err := c.decodeAction(raw, &x); err != nil {
		t.Fatal(err)
	}
	if err := c.decodeAction(raw, &y); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x, y) || x.Modify == y.Modify {
		t.Errorf("memoised decode must be equal but not share Modify: %+v %+v", x, y)
	}
}

// FuzzMatchJSON checks the direct decoder against encoding/json.
func FuzzMatchJSON(f *testing.F) {
	for _, m := range matchCases {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got callpolicy.Match
		werr := json.Unmarshal(b, &want)
		gerr := decodeMatch(b, &got)
		if werr == nil && (gerr != nil || got != want) {
			t.Fatalf("%q: got %+v, %v; encoding/json %+v", b, got, gerr, want)
		}
		if werr != nil && gerr == nil {
			t.Fatalf("%q: accepted, encoding/json says %v", b, werr)
		}
	})
}
