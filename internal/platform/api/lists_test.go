package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

const blockPath = "/api/v1/policies/default/lists/block/entries"

type entriesBody struct {
	Entries []callpolicy.ListEntry `json:"entries"`
}

func TestListEntriesJSON(t *testing.T) {
	e := newEnv(t)
	var one callpolicy.ListEntry
	e.must(201, "POST", blockPath, `{"calling":"9725550101","note":"Robocaller Inc"}`).decode(t, &one)
	if one.ID <= 0 || one.List != callpolicy.BlockList || one.PolicyID != "default" || one.Calling != "9725550101" {
		t.Errorf("single entry = %+v", one)
	}
	var many entriesBody
	e.must(201, "POST", blockPath, `[{"calling":"prefix:1900"},{"calling":"4155550100","called":"911","note":"test"}]`).decode(t, &many)
	if len(many.Entries) != 2 || many.Entries[0].ID <= 0 || many.Entries[1].Called != "911" {
		t.Errorf("array entries = %+v", many)
	}

	cases := []struct {
		name, query string
		want        int
	}{
		{"all", "", 3},
		{"by calling", "?q=1900", 1},
		{"by called", "?q=911", 1},
		{"by note, any case", "?q=robocaller", 1},
		{"none", "?q=77777", 0},
	}
	for _, c := range cases {
		var got entriesBody
		e.must(200, "GET", blockPath+c.query, "").decode(t, &got)
		if len(got.Entries) != c.want {
			t.Errorf("%s: %d entries, want %d: %+v", c.name, len(got.Entries), c.want, got.Entries)
		}
	}
	var allow entriesBody
	e.must(200, "GET", "/api/v1/policies/default/lists/allow/entries", "").decode(t, &allow)
	if allow.Entries == nil || len(allow.Entries) != 0 {
		t.Errorf("allow list = %+v, want an empty array", allow)
	}

	// The engine sees the block list.
	d, ok := e.engine.DryRun("default", &callpolicy.Call{Calling: "19005550000", Called: "1000"}, e.now())
	if !ok || d.Step != callpolicy.StepBlockList {
		t.Errorf("engine after block entry: %+v %v", d, ok)
	}

	e.must(204, "DELETE", fmt.Sprintf("%s/%d", blockPath, one.ID), "")
	e.must(404, "DELETE", fmt.Sprintf("%s/%d", blockPath, one.ID), "")
	e.must(404, "DELETE", blockPath+"/x", "")
	// An entry id of the block list is not found in the allow list.
	e.must(404, "DELETE", fmt.Sprintf("/api/v1/policies/default/lists/allow/entries/%d", many.Entries[0].ID), "")
}

func TestListEntriesRefused(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, path, ct, body string
		status               int
		field, contains      string
	}{
		{"unknown list", "/api/v1/policies/default/lists/grey/entries", "", `{"calling":"1"}`, 404, "", "grey"},
		{"unknown policy", "/api/v1/policies/nope/lists/block/entries", "", `{"calling":"1"}`, 404, "", "nope"},
		{"missing calling", blockPath, "", `{"note":"x"}`, 400, "calling", "calling"},
		{"bad pattern in array", blockPath, "", `[{"calling":"1"},{"calling":"pattern:[1-"}]`, 400, "entries[1].calling", "entries[1].calling"},
		{"unknown field", blockPath, "", `{"calling":"1","number":"2"}`, 400, "number", "unknown field"},
		{"list mismatch", blockPath, "", `{"calling":"1","list":"allow"}`, 400, "list", "differs"},
		{"empty array", blockPath, "", `[]`, 400, "", "no entries"},
		{"xml", blockPath, "application/xml", `<e/>`, 415, "", "text/csv"},
		{"bad csv line", blockPath, "text/csv", "calling,called,expires_at,note\n1111\n2222\npattern:[9-,,,\n", 400, "", "line 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.req("POST", c.path, adminToken, c.ct, c.body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Body)
			}
			eb := r.errBody(t)
			if c.field != "" && eb.Field != c.field {
				t.Errorf("field %q, want %q (%q)", eb.Field, c.field, eb.Error)
			}
			if !strings.Contains(eb.Error, c.contains) {
				t.Errorf("error %q lacks %q", eb.Error, c.contains)
			}
		})
	}
	for _, list := range []callpolicy.ListKind{callpolicy.AllowList, callpolicy.BlockList} {
		if got, _ := e.st.ListEntries(context.Background(), "default", list); len(got) != 0 {
			t.Errorf("refused input stored %d %s entries", len(got), list)
		}
	}
	e.must(400, "GET", blockPath+"?format=xml", "")
}

func TestListEntriesCSVRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", "/api/v1/policies", `{"id":"copy"}`)
	var in strings.Builder
	if err := callpolicy.WriteEntriesCSV(&in, []callpolicy.ListEntry{
		{Calling: "9725550101", Note: "nuisance, with comma"},
		{Calling: "prefix:1900", Called: "prefix:1800"},
		{Calling: "pattern:972555XXXX", Note: `quoted "note"`},
	}); err != nil {
		t.Fatal(err)
	}
	var imported entriesBody
	e.req("POST", blockPath, adminToken, "text/csv; charset=utf-8", in.String()).decode(t, &imported)
	if len(imported.Entries) != 3 || imported.Entries[0].ID <= 0 {
		t.Fatalf("import = %+v", imported)
	}

	export := e.req("GET", blockPath+"?format=csv", adminToken, "", "")
	if export.Status != 200 || !strings.HasPrefix(export.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s", export.Status, export.Header.Get("Content-Type"))
	}
	// Accept: text/csv gives the same export.
	r := e.reqH("GET", blockPath, map[string]string{"Authorization": "Bearer " + adminToken, "Accept": "text/csv"}, "")
	if string(r.Body) != string(export.Body) {
		t.Errorf("Accept: text/csv export differs:\n%s\nvs\n%s", r.Body, export.Body)
	}

	// Import the export into another policy's list: same entries.
	copyPath := "/api/v1/policies/copy/lists/block/entries"
	if res := e.req("POST", copyPath, adminToken, "text/csv", string(export.Body)); res.Status != 201 {
		t.Fatalf("re-import: %d %s", res.Status, res.Body)
	}
	again := e.req("GET", copyPath+"?format=csv", adminToken, "", "")
	if string(again.Body) != string(export.Body) {
		t.Errorf("round trip differs:\n%s\nvs\n%s", again.Body, export.Body)
	}
	orig, _ := e.st.ListEntries(context.Background(), "default", callpolicy.BlockList)
	cp, _ := e.st.ListEntries(context.Background(), "copy", callpolicy.BlockList)
	if len(orig) != len(cp) {
		t.Fatalf("%d vs %d entries", len(orig), len(cp))
	}
	for i := range orig {
		if orig[i].Calling != cp[i].Calling || orig[i].Called != cp[i].Called || orig[i].Note != cp[i].Note {
			t.Errorf("entry %d: %+v vs %+v", i, orig[i], cp[i])
		}
	}
}
