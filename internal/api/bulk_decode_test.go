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
			isArray, err := decodeBulkRules([]byte(tt.body), func(i int, in *ruleInput) {
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
