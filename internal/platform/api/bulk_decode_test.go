package api

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeBulkRulesMatchesWholeDecode: the element-wise fast path must
// accept, refuse and report exactly as decoding the body as one value.
func TestDecodeBulkRulesMatchesWholeDecode(t *testing.T) {
	rule := `{"priority":1,"enabled":false,"match":{"calling":"+15551234567","called":"prefix:9"},"action":{"decision":"deny","reason":"blocked"},"tags":["a"],"expires_at":"2030-01-02T03:04:05Z"}`
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf(`{"priority":%d,"match":{"calling":"+1555%07d"},"action":{"decision":"deny"}}`, i, i))
	}
	tests := []struct {
		name, body string
		wantErr    bool
	}{
		{"two rules", "[" + rule + "," + rule + "]", false},
		{"many rules", "[" + strings.Join(many, ",") + "]", false},
		{"empty array", "[]", false},
		{"whitespace", " \n[ " + rule + " ]\n ", false},
		{"null", "null", false},
		{"object", rule, true},
		{"string", `"x"`, true},
		{"trailing value", "[] []", true},
		{"trailing garbage", "[" + rule + "] x", true},
		{"unknown field", `[{"colour":"red"}]`, true},
		{"type error", `[{"priority":"high"}]`, true},
		{"bad time", `[{"expires_at":"tomorrow"}]`, true},
		{"unterminated", "[" + rule, true},
		{"missing comma", "[" + rule + rule + "]", true},
		{"empty", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []ruleInput
			wantErr := decodeJSONBytes([]byte(tt.body), &want)
			var got []ruleInput
			isArray, err := decodeBulkRules([]byte(tt.body), func(i int, in *ruleInput, _ []byte) {
				if i == 0 {
					got = got[:0]
				}
				got = append(got, *in)
			})
			if err == nil && !isArray {
				got = nil
			} else if err == nil && got == nil {
				got = []ruleInput{}
			}
			if (err != nil) != tt.wantErr || (wantErr != nil) != tt.wantErr {
				t.Fatalf("err %v, whole-body err %v, want error %v", err, wantErr, tt.wantErr)
			}
			if err != nil {
				if err.Error() != wantErr.Error() {
					t.Errorf("error %q, whole-body decode says %q", err, wantErr)
				}
				return
			}
			if (got == nil) != (want == nil) || len(got) != len(want) {
				t.Fatalf("got %d rules (nil %v), want %d (nil %v)", len(got), got == nil, len(want), want == nil)
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("rule %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// FuzzDecodeBulkRules: the bulk decoder (fastRule, with encoding/json for
// what it does not take) accepts, refuses and decodes every body exactly as
// decoding it whole with encoding/json does; and whatever fastRule takes on
// its own, encoding/json decodes to the same rule.
func FuzzDecodeBulkRules(f *testing.F) {
	for _, s := range []string{
		`[]`, `null`, ` [ ] `, `[{}]`, `[{},{}]`,
		`[{"priority":1,"enabled":false,"match":{"calling":"+15551234567","called":"prefix:9"},"action":{"decision":"deny","reason":"blocked"},"tags":["a"],"expires_at":"2030-01-02T03:04:05Z"}]`,
		`[{"id":7,"policy_id":"default","priority":-3,"hits":12,"description":"Grüße","tags":[],"match":{"trigger_point":"x","device_name":"SEP1"}}]`,
		`[{"priority":1.5}]`, `[{"priority":01}]`, `[{"priority":1e3}]`, `[{"priority":99999999999999999999}]`,
		`[{"Priority":1}]`, `[{"priority":1,"priority":2}]`, `[{"match":{"calling":"a"},"match":{"called":"b"}}]`,
		`[{"description":"a\"b"}]`, `[{"description":"a\u00e9"}]`, "[{\"description\":\"\xff\"}]", `[{"tags":null}]`,
		`[{"enabled":null}]`, `[{"enabled":true,}]`, `[{"action":{"decision":"divert","modify":{"called_number":"1"}}}]`,
		`[{"schedule":{"days":["mon"]}}]`, `[null]`, `[1]`, `[{}]x`, `[{},]`, `[{"a":1}]`, `{"priority":1}`, `[{"tags":["a",]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []ruleInput
		isArray, err := decodeBulkRules(body, func(i int, in *ruleInput, _ []byte) {
			if i == 0 {
				got = got[:0]
			}
			got = append(got, *in)
		})
		var want []ruleInput
		wantErr := decodeJSONBytes(body, &want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: err %v, whole-body err %v", body, err, wantErr)
		}
		if err != nil {
			if err.Error() != wantErr.Error() {
				t.Fatalf("%q: error %q, whole-body %q", body, err, wantErr)
			}
			return
		}
		if isArray != (want != nil) {
			t.Fatalf("%q: isArray %v, whole-body decode %v", body, isArray, want)
		}
		if isArray && (len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want))) {
			t.Fatalf("%q:\n got %+v\nwant %+v", body, got, want)
		}

		// fastRule alone, on the body as one object.
		var in ruleInput
		p := skipWS(body, 0)
		if end, ok := fastRule(body, p, &in); ok {
			var ref ruleInput
			if err := decodeJSONBytes(body[p:end], &ref); err != nil {
				t.Fatalf("%q: fastRule took it, encoding/json says %v", body[p:end], err)
			}
			if !reflect.DeepEqual(in, ref) {
				t.Fatalf("%q: fastRule\n %+v\nencoding/json\n %+v", body[p:end], in, ref)
			}
		}
	})
}
