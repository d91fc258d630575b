package app

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
)

// TestStoredCallCopiesEveryField: the call log's record is built from the
// call record, field by field; a field added to both but not copied would
// be stored empty. Every field of the call record is set to a value of its
// own, and each field of the stored record must carry the value of the
// call record's field of the same JSON name.
func TestStoredCallCopiesEveryField(t *testing.T) {
	var rec callrecord.Record
	v := reflect.ValueOf(&rec).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("value-%d", i))
		case reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(time.Unix(int64(1e9+i), 0).UTC()))
		default:
			t.Fatalf("callrecord.Record.%s: a %s the test does not fill", v.Type().Field(i).Name, f.Kind())
		}
	}
	var want, got map[string]any
	b, _ := json.Marshal(rec)
	_ = json.Unmarshal(b, &want)
	b, _ = json.Marshal(storedCall(&rec))
	_ = json.Unmarshal(b, &got)
	delete(got, "id") // the store's own
	for name, g := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("the stored record's %q has no field in the call record", name)
		} else if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("the stored record's %q is %v, the call record's %v", name, g, w)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok && name != "version" && name != "node" {
			t.Errorf("the call record's %q is not stored", name)
		}
	}
}
