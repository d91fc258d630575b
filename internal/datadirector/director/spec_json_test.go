package director

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jsonFields lists, by JSON name folded to lower case (encoding/json
// matches names case-insensitively when it decodes), the Go fields of t
// that carry it, following embedded structs as encoding/json does.
func jsonFields(t reflect.Type, path string, out map[string][]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			jsonFields(ft, path+f.Name+".", out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		key := strings.ToLower(name)
		out[key] = append(out[key], path+f.Name)
	}
}

// sharedJSONNames is every JSON name that two fields of t carry: encoding/
// json keeps neither (same depth) or the shallower one, silently.
func sharedJSONNames(t reflect.Type) map[string][]string {
	all := map[string][]string{}
	jsonFields(t, "", all)
	for name, fields := range all {
		if len(fields) < 2 {
			delete(all, name)
		}
	}
	return all
}

// TestSinkSpecsShareNoJSONName: each sink's part of a FeedSpec sits at the
// top level of its JSON; a field one sink package adds under a name
// another part has would vanish from the API without an error.
func TestSinkSpecsShareNoJSONName(t *testing.T) {
	for name, fields := range sharedJSONNames(reflect.TypeFor[FeedSpec]()) {
		slices.Sort(fields)
		t.Errorf("JSON name %q is carried by %s: encoding/json drops it", name, strings.Join(fields, " and "))
	}
	// The check finds a clash where there is one.
	type a struct {
		URL string `json:"url"`
	}
	type b struct {
		Target string `json:"URL"`
	}
	type clash struct {
		a
		b
		Name string `json:"name"`
	}
	if got := sharedJSONNames(reflect.TypeFor[clash]()); len(got["url"]) != 2 {
		t.Errorf("a clash of url and URL not found: %v", got)
	}
}
