package api

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/platform/store"
)

func TestDirectories(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusCreated, "POST", "/api/v1/directories", `{"id":"corp","name":"Corporate","fallback_name":"Outside caller"}`)
	if r := e.admin("POST", "/api/v1/directories", `{"id":"corp","name":"again"}`); r.Status != http.StatusConflict {
		t.Errorf("duplicate: %d %s", r.Status, r.Body)
	}
	if r := e.admin("POST", "/api/v1/directories", `{"id":"Bad Id","name":"x"}`); r.Status != http.StatusBadRequest || r.errBody(t).Field != "id" {
		t.Errorf("bad id: %d %s", r.Status, r.Body)
	}

	// pgiralt/ucm_name_lookup's own directory imports as it is.
	raw, err := os.ReadFile("../../callcontrol/directory/testdata/ucm_name_lookup_phone_directory.csv")
	if err != nil {
		t.Fatal(err)
	}
	r := e.req("PUT", "/api/v1/directories/corp/entries", adminToken, "text/csv", string(raw))
	var imp struct {
		Read   struct{ Entries int }
		Change store.DirectoryChange
	}
	r.decode(t, &imp)
	if r.Status != http.StatusOK || imp.Read.Entries != 10 || imp.Change.Added != 10 {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}

	// A bad line is named, and changes nothing.
	v := e.configVersion()
	r = e.req("PUT", "/api/v1/directories/corp/entries", adminToken, "text/csv", "number,name\n+1,A\n+1x2,B\n")
	if r.Status != http.StatusBadRequest || !strings.Contains(r.errBody(t).Error, "line 3: number:") {
		t.Errorf("bad line: %d %s", r.Status, r.Body)
	}
	if e.configVersion() != v {
		t.Error("a refused import changed the configuration")
	}

	// A rule names callers from it; the dry run says how.
	e.must(http.StatusCreated, "POST", "/api/v1/policies/default/rules",
		`{"priority":1,"enabled":true,"action":{"decision":"permit","modify":{"calling_name":"directory:corp"}}}`)
	for _, c := range []struct{ calling, transformed, name, lookup string }{
		{"+13125550000", "", `calling_name="Chicago"`, `from directory corp, prefix +1312 (calling)`},
		{"5551002", "+12125551002", `calling_name="Bob Smith"`, `from directory corp, number +12125551002 (transformed_calling)`},
		{"+33100000000", "", `calling_name="Outside caller"`, `fallback name "Outside caller"`},
	} {
		r := e.must(http.StatusOK, "POST", "/api/v1/policies/default/evaluate",
			fmt.Sprintf(`{"calling":%q,"transformed_calling":%q,"called":"2000"}`, c.calling, c.transformed))
		var ev struct {
			Decision struct {
				Action struct {
					Modify struct {
						CallingName string `json:"calling_name"`
					}
				}
				NameLookup string `json:"name_lookup"`
			}
		}
		r.decode(t, &ev)
		if `calling_name="`+ev.Decision.Action.Modify.CallingName+`"` != c.name || !strings.Contains(ev.Decision.NameLookup, c.lookup) {
			t.Errorf("%s: %s", c.calling, r.Body)
		}
	}
	if r := e.admin("POST", "/api/v1/policies/default/rules",
		`{"priority":2,"enabled":true,"action":{"decision":"permit","modify":{"calling_name":"directory:hr"}}}`); r.Status != http.StatusBadRequest ||
		r.errBody(t).Field != "action.modify.calling_name" || !strings.Contains(r.errBody(t).Error, `directory "hr" does not exist`) {
		t.Errorf("missing directory: %d %s", r.Status, r.Body)
	}
	if r := e.admin("PUT", "/api/v1/policies/default/rules",
		`[{"enabled":true,"action":{"decision":"permit"}},{"enabled":true,"action":{"decision":"permit","modify":{"calling_name":"directory:hr"}}}]`); r.Status != http.StatusBadRequest ||
		r.errBody(t).Field != "rules[1].action.modify.calling_name" {
		t.Errorf("missing directory in bulk: %d %s", r.Status, r.Body)
	}

	// Search, add, rename, delete.
	r = e.must(http.StatusOK, "GET", "/api/v1/directories/corp/entries?name=smith", "")
	if !strings.Contains(string(r.Body), `"number":"+12125551002","name":"Bob Smith","match":"exact"`) || strings.Count(string(r.Body), `"number"`) != 1 {
		t.Errorf("search by name: %s", r.Body)
	}
	r = e.must(http.StatusOK, "GET", "/api/v1/directories/corp/entries?number=%2B1%20(212)", "")
	if strings.Count(string(r.Body), `"number"`) != 6 {
		t.Errorf("search by number: %s", r.Body)
	}
	e.must(http.StatusOK, "POST", "/api/v1/directories/corp/entries", `[{"number":"+12125551001","name":"Alice J."},{"number":"+1646","name":"Manhattan","match":"prefix"}]`)
	if r := e.admin("POST", "/api/v1/directories/corp/entries", `[{"number":"+1","name":"A"},{"number":"+1","name":"B"}]`); r.Status != http.StatusBadRequest ||
		r.errBody(t).Field != "entries[1].number" {
		t.Errorf("duplicate in a body: %d %s", r.Status, r.Body)
	}
	e.must(http.StatusNoContent, "DELETE", "/api/v1/directories/corp/entries/+1646?match=prefix", "")
	if r := e.admin("DELETE", "/api/v1/directories/corp/entries/+1646?match=prefix", ""); r.Status != http.StatusNotFound {
		t.Errorf("delete twice: %d", r.Status)
	}

	// CSV export reads back as the same directory.
	r = e.must(http.StatusOK, "GET", "/api/v1/directories/corp/entries?format=csv", "")
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") || !strings.Contains(string(r.Body), "+12125551001,Alice J.,exact\n") ||
		!strings.Contains(string(r.Body), "+1919476,\"RTP, NC\",prefix\n") {
		t.Errorf("export: %s %s", ct, r.Body)
	}
	r2 := e.req("PUT", "/api/v1/directories/corp/entries", adminToken, "text/csv", string(r.Body))
	if !strings.Contains(string(r2.Body), `"added":0,"changed":0,"removed":0,"unchanged":10`) {
		t.Errorf("re-import of the export: %s", r2.Body)
	}

	// In use: not deleted, and the error names the rule.
	if r := e.admin("DELETE", "/api/v1/directories/corp", ""); r.Status != http.StatusConflict || !strings.Contains(r.errBody(t).Error, "rule ") {
		t.Errorf("delete in use: %d %s", r.Status, r.Body)
	}
	r = e.must(http.StatusOK, "GET", "/api/v1/directories/corp", "")
	if !strings.Contains(string(r.Body), `"entries":10`) {
		t.Errorf("get: %s", r.Body)
	}
	// A viewer reads but does not write.
	if r := e.req("GET", "/api/v1/directories", "", "", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("anonymous list: %d", r.Status)
	}
}
