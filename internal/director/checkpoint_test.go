package director

import (
	"strings"
	"testing"
)

// A checkpoint decodes to what was encoded; anything else is refused with
// the reason.
func TestCheckpointCodec(t *testing.T) {
	for _, cp := range []checkpoint{
		{next: 0},
		{next: 1 << 40},
		{next: 1000, open: []int64{3, 4, 900, 999}},
	} {
		got, err := parseCheckpoint(cp.appendTo(nil))
		if err != nil || !got.equal(&cp) {
			t.Errorf("%+v: decoded %+v, %v", cp, got, err)
		}
		want := cp.next
		if len(cp.open) > 0 {
			want = cp.open[0]
		}
		if got.commit() != want {
			t.Errorf("%+v: commit %d, want %d", cp, got.commit(), want)
		}
	}
	good := (&checkpoint{next: 10, open: []int64{2, 5}}).appendTo(nil)
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":          {nil, "version 1"},
		"version":        {append([]byte{2}, good[1:]...), "version 1"},
		"truncated":      {[]byte{1, 0x80}, "truncated"},
		"short":          {good[:len(good)-1], "open offsets in"},
		"trailing":       {append(good, 0), "after the open offsets"},
		"count too big":  {[]byte{1, 10, 200, 1}, "open offsets in"},
		"not ascending":  {[]byte{1, 10, 2, 5, 0}, "not above"},
		"not below next": {[]byte{1, 10, 1, 10}, "below next"},
	} {
		_, err := parseCheckpoint(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", name, err, tc.want)
		}
	}
	for _, k := range []tp{{"SCP", 0}, {"a/b", 11}} {
		if got, ok := parseCheckpointKey(checkpointKey(k)); !ok || got != k {
			t.Errorf("key %v: parsed %v %v", k, got, ok)
		}
	}
	for _, bad := range []string{"", "SCP", "/1", "SCP/x", "SCP/-1"} {
		if _, ok := parseCheckpointKey([]byte(bad)); ok {
			t.Errorf("key %q parsed", bad)
		}
	}
}

// FuzzParseCheckpoint: any bytes decode or are refused, never panic, and
// what decodes encodes back to the same bytes.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add((&checkpoint{next: 1000, open: []int64{3, 4, 900}}).appendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := parseCheckpoint(b)
		if err != nil {
			return
		}
		if got := cp.appendTo(nil); string(got) != string(b) {
			// Varints have one shortest form; a longer one decodes too.
			if again, err := parseCheckpoint(got); err != nil || !again.equal(&cp) {
				t.Fatalf("%x decoded to %+v, which encodes to %x", b, cp, got)
			}
		}
	})
}
