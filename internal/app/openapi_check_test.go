package app

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/signalbox/signalbox/internal/platform/api"
)

// The OpenAPI Initiative's JSON Schema of OpenAPI 3.1 documents, as
// published at its $id (Apache-2.0): the structure of the document; the
// schemas inside it are checked by compiling each of them against JSON
// Schema 2020-12.
//
//go:embed testdata/oas-3.1-schema-2022-10-07.json
var oas31Schema []byte

// docURL is where the contract's document is held in the compiler: schema
// locations are this plus a JSON pointer into the document.
const docURL = "https://signalbox.invalid/openapi.json"

// apiContract checks requests and answers against the OpenAPI document:
// the operation by method and path, its path and query parameters, the
// request body's media type and schema, and the answer's status, media
// type and schema. It reads the document as JSON Schema 2020-12 (OpenAPI
// 3.1's dialect) through santhosh-tekuri/jsonschema, formats asserted.
type apiContract struct {
	doc     any
	c       *jsonschema.Compiler
	ops     []contractOp
	schemas map[string]*jsonschema.Schema // by JSON pointer
}

type contractOp struct {
	method, template string
	re               *regexp.Regexp
	literals         int    // literal path segments: the most specific template wins
	ptr              string // JSON pointer to the operation
	params           []contractParam
}

type contractParam struct {
	name, in string
	required bool
	schema   string // JSON pointer to its schema, "" for none
}

// newAPIContract reads the document and checks it: valid against the
// OpenAPI 3.1 schema, every schema in it a valid JSON Schema, every $ref
// resolvable.
func newAPIContract(raw []byte) (*apiContract, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	oas, err := jsonschema.UnmarshalJSON(bytes.NewReader(oas31Schema))
	if err != nil {
		return nil, fmt.Errorf("OpenAPI 3.1 schema: %w", err)
	}
	mc := jsonschema.NewCompiler()
	const oasURL = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	if err := mc.AddResource(oasURL, oas); err != nil {
		return nil, err
	}
	meta, err := mc.Compile(oasURL)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI 3.1 schema: %w", err)
	}
	if err := meta.Validate(doc); err != nil {
		return nil, fmt.Errorf("not a valid OpenAPI 3.1 document: %w", err)
	}

	k := &apiContract{doc: doc, c: jsonschema.NewCompiler(), schemas: map[string]*jsonschema.Schema{}}
	k.c.DefaultDraft(jsonschema.Draft2020)
	k.c.AssertFormat()
	if err := k.c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	var errs []error
	errs = append(errs, unknownKeywords(k.at("/components/schemas"), "/components/schemas", false)...)
	comps, _ := k.at("/components/schemas").(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(comps)) {
		if _, err := k.schema("/components/schemas/" + escapePtr(name)); err != nil {
			errs = append(errs, err)
		}
	}
	paths, _ := k.at("/paths").(map[string]any)
	for _, tmpl := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[tmpl].(map[string]any)
		for _, m := range slices.Sorted(maps.Keys(item)) {
			switch m {
			case "get", "put", "post", "delete", "patch", "head":
			default:
				continue
			}
			op, err := k.operation(strings.ToUpper(m), tmpl)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			k.ops = append(k.ops, op)
			// Every schema of the operation compiles.
			for _, p := range op.params {
				if p.schema == "" {
					errs = append(errs, fmt.Errorf("%s %s: parameter %s has no schema", op.method, tmpl, p.name))
				} else if _, err := k.schema(p.schema); err != nil {
					errs = append(errs, err)
				} else {
					errs = append(errs, unknownKeywords(k.at(p.schema), p.schema, true)...)
				}
			}
			for _, ptr := range k.contentSchemas(op.ptr) {
				if _, err := k.schema(ptr); err != nil {
					errs = append(errs, err)
				} else {
					errs = append(errs, unknownKeywords(k.at(ptr), ptr, true)...)
				}
			}
		}
	}
	return k, errors.Join(errs...)
}

// at is the document's node at a JSON pointer, nil if there is none.
func (k *apiContract) at(ptr string) any {
	n := k.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := n.(type) {
		case map[string]any:
			n = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			n = x[i]
		default:
			return nil
		}
	}
	return n
}

// deref follows an OpenAPI reference object ({"$ref": "#/..."}) to where
// it points, and gives that node's pointer.
func (k *apiContract) deref(ptr string) (string, map[string]any, error) {
	for range 8 {
		m, ok := k.at(ptr).(map[string]any)
		if !ok {
			return ptr, nil, fmt.Errorf("%s: not an object", ptr)
		}
		ref, isRef := m["$ref"].(string)
		if !isRef {
			return ptr, m, nil
		}
		if !strings.HasPrefix(ref, "#/") {
			return ptr, nil, fmt.Errorf("%s: $ref %s is not local", ptr, ref)
		}
		ptr = ref[1:]
	}
	return ptr, nil, fmt.Errorf("%s: $ref chain too long", ptr)
}

func (k *apiContract) schema(ptr string) (*jsonschema.Schema, error) {
	if s, ok := k.schemas[ptr]; ok {
		return s, nil
	}
	s, err := k.c.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", ptr, err)
	}
	k.schemas[ptr] = s
	return s, nil
}

// operation gathers an operation's parameters (the path item's and its own,
// its own winning) and a pattern for its path.
func (k *apiContract) operation(method, tmpl string) (contractOp, error) {
	itemPtr := "/paths/" + escapePtr(tmpl)
	op := contractOp{method: method, template: tmpl, ptr: itemPtr + "/" + strings.ToLower(method)}
	byKey := map[string]contractParam{}
	var order []string
	for _, base := range []string{itemPtr, op.ptr} {
		list, _ := k.at(base + "/parameters").([]any)
		for i := range list {
			ptr, p, err := k.deref(fmt.Sprintf("%s/parameters/%d", base, i))
			if err != nil {
				return op, fmt.Errorf("%s %s: %w", method, tmpl, err)
			}
			cp := contractParam{name: fmt.Sprint(p["name"]), in: fmt.Sprint(p["in"])}
			cp.required, _ = p["required"].(bool)
			if _, ok := p["schema"]; ok {
				cp.schema = ptr + "/schema"
			}
			key := cp.in + " " + cp.name
			if _, seen := byKey[key]; !seen {
				order = append(order, key)
			}
			byKey[key] = cp
		}
	}
	for _, key := range order {
		op.params = append(op.params, byKey[key])
	}
	var pat strings.Builder
	pat.WriteString("^")
	for _, seg := range strings.Split(strings.TrimPrefix(tmpl, "/"), "/") {
		pat.WriteString("/")
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			fmt.Fprintf(&pat, "(?P<%s>[^/]+)", strings.Trim(seg, "{}"))
			continue
		}
		op.literals++
		pat.WriteString(regexp.QuoteMeta(seg))
	}
	pat.WriteString("$")
	re, err := regexp.Compile(pat.String())
	if err != nil {
		return op, fmt.Errorf("%s %s: %w", method, tmpl, err)
	}
	op.re = re
	for _, p := range op.params {
		if p.in == "path" && re.SubexpIndex(p.name) < 0 {
			return op, fmt.Errorf("%s %s: path parameter %s is not in the path", method, tmpl, p.name)
		}
	}
	return op, nil
}

// contentSchemas lists the pointers of every media type schema of an
// operation: its request body's and its answers'.
func (k *apiContract) contentSchemas(opPtr string) []string {
	var out []string
	add := func(ptr string) {
		ptr, m, err := k.deref(ptr)
		if err != nil {
			return
		}
		content, _ := m["content"].(map[string]any)
		for _, mt := range slices.Sorted(maps.Keys(content)) {
			if c, ok := content[mt].(map[string]any); ok && c["schema"] != nil {
				out = append(out, ptr+"/content/"+escapePtr(mt)+"/schema")
			}
		}
	}
	if k.at(opPtr+"/requestBody") != nil {
		add(opPtr + "/requestBody")
	}
	resps, _ := k.at(opPtr + "/responses").(map[string]any)
	for _, code := range slices.Sorted(maps.Keys(resps)) {
		add(opPtr + "/responses/" + escapePtr(code))
	}
	return out
}

// find is the operation a request is for: the template with the most
// literal segments among those that match.
func (k *apiContract) find(method, path string) (contractOp, map[string]string, bool) {
	best, found := contractOp{}, false
	for _, op := range k.ops {
		if op.method == method && op.re.MatchString(path) && (!found || op.literals > best.literals) {
			best, found = op, true
		}
	}
	if !found {
		return best, nil, false
	}
	vars := map[string]string{}
	m := best.re.FindStringSubmatch(path)
	for i, name := range best.re.SubexpNames() {
		if name != "" {
			v, err := url.PathUnescape(m[i])
			if err != nil {
				v = m[i]
			}
			vars[name] = v
		}
	}
	return best, vars, true
}

// checkRequest lists what of a request the document does not allow.
func (k *apiContract) checkRequest(req *http.Request, body []byte) []string {
	op, vars, ok := k.find(req.Method, req.URL.Path)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no documented operation", req.Method, req.URL.Path)}
	}
	var out []string
	query := req.URL.Query()
	for _, p := range op.params {
		var val string
		var present bool
		switch p.in {
		case "path":
			val, present = vars[p.name], true
		case "query":
			if vs, ok := query[p.name]; ok {
				val, present = vs[0], true
			}
		case "header":
			if vs := req.Header.Values(p.name); len(vs) > 0 {
				val, present = vs[0], true
			}
		default:
			continue
		}
		if !present {
			if p.required {
				out = append(out, fmt.Sprintf("%s parameter %s is required", p.in, p.name))
			}
			continue
		}
		if p.schema == "" {
			continue
		}
		s, err := k.schema(p.schema)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if err := s.Validate(k.coerce(p.schema, val)); err != nil {
			out = append(out, fmt.Sprintf("%s parameter %s=%q: %v", p.in, p.name, val, err))
		}
	}
	rbPtr, rb, err := k.deref(op.ptr + "/requestBody")
	if err != nil {
		if len(body) > 0 {
			out = append(out, "a request body where the operation takes none")
		}
		return out
	}
	if len(body) == 0 {
		if req, _ := rb["required"].(bool); req {
			out = append(out, "the request body is required")
		}
		return out
	}
	out = append(out, k.checkContent(rbPtr, rb, req.Header.Get("Content-Type"), body, "request")...)
	return out
}

// checkResponse lists what of an answer the document does not allow.
func (k *apiContract) checkResponse(req *http.Request, status int, h http.Header, body []byte) []string {
	op, _, ok := k.find(req.Method, req.URL.Path)
	if !ok {
		return []string{fmt.Sprintf("%s %s: no documented operation", req.Method, req.URL.Path)}
	}
	code := strconv.Itoa(status)
	var ptr string
	for _, c := range []string{code, code[:1] + "XX", "default"} {
		if k.at(op.ptr+"/responses/"+c) != nil {
			ptr = op.ptr + "/responses/" + c
			break
		}
	}
	if ptr == "" {
		return []string{fmt.Sprintf("status %d is not documented for %s %s", status, op.method, op.template)}
	}
	ptr, resp, err := k.deref(ptr)
	if err != nil {
		return []string{err.Error()}
	}
	if resp["content"] == nil {
		if len(body) > 0 {
			return []string{fmt.Sprintf("status %d: a body where the document says none", status)}
		}
		return nil
	}
	if req.Method == "HEAD" {
		return nil
	}
	return k.checkContent(ptr, resp, h.Get("Content-Type"), body, "answer")
}

// checkContent checks a body against a request body's or an answer's
// content map: its media type is one of the map's, and a JSON body
// (application/json, +json; each line of application/x-ndjson) is valid
// against that media type's schema.
func (k *apiContract) checkContent(ptr string, obj map[string]any, ctype string, body []byte, what string) []string {
	content, _ := obj["content"].(map[string]any)
	mt, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		return []string{fmt.Sprintf("%s Content-Type %q: %v", what, ctype, err)}
	}
	c, ok := content[mt].(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s media type %s is not documented (documented: %s)", what, mt, strings.Join(slices.Sorted(maps.Keys(content)), ", "))}
	}
	if c["schema"] == nil {
		return nil
	}
	var docs [][]byte
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		docs = [][]byte{body}
	case mt == "application/x-ndjson":
		for _, line := range bytes.Split(body, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				docs = append(docs, line)
			}
		}
	default:
		return nil // CSV, pcap: the media type is the contract
	}
	s, err := k.schema(ptr + "/content/" + escapePtr(mt) + "/schema")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, d := range docs {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d))
		if err != nil {
			out = append(out, fmt.Sprintf("%s body is not JSON: %v", what, err))
			continue
		}
		if err := s.Validate(v); err != nil {
			out = append(out, fmt.Sprintf("%s body: %v", what, err))
		}
	}
	return out
}

// coerce turns a parameter's text into the JSON value its schema's type
// asks for, as a server reading it would; text that is not of that type
// stays a string, which the schema then refuses.
func (k *apiContract) coerce(schemaPtr, val string) any {
	_, m, err := k.deref(schemaPtr)
	if err != nil {
		return val
	}
	types := []string{}
	switch t := m["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, x := range t {
			types = append(types, fmt.Sprint(x))
		}
	}
	for _, t := range types {
		switch t {
		case "integer", "number":
			if _, err := strconv.ParseFloat(val, 64); err == nil {
				if n, err := jsonschema.UnmarshalJSON(strings.NewReader(val)); err == nil {
					return n
				}
			}
		case "boolean":
			if b, err := strconv.ParseBool(val); err == nil {
				return b
			}
		}
	}
	return val
}

// schemaKeywords are the keywords of a schema object: JSON Schema 2020-12's
// and OpenAPI 3.1's. A YAML slip (an unquoted comma in a flow mapping's
// description) turns text into a key of the schema, which JSON Schema
// ignores: unknownKeywords finds it.
var schemaKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`$schema $id $ref $anchor $dynamicRef $dynamicAnchor $defs $comment $vocabulary
		type enum const format title description default examples example deprecated readOnly writeOnly
		properties patternProperties additionalProperties propertyNames required minProperties maxProperties
		dependentRequired dependentSchemas unevaluatedProperties items prefixItems contains minContains maxContains
		minItems maxItems uniqueItems unevaluatedItems allOf anyOf oneOf not if then else
		minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength pattern
		contentMediaType contentEncoding contentSchema discriminator xml externalDocs`) {
		schemaKeywords[k] = true
	}
}

// unknownKeywords lists the keys of the schemas under n (a schema when
// isSchema, else a map of named schemas) that are no schema keyword.
func unknownKeywords(n any, ptr string, isSchema bool) []error {
	var errs []error
	m, ok := n.(map[string]any)
	if !ok {
		return nil
	}
	if !isSchema {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, unknownKeywords(m[name], ptr+"/"+escapePtr(name), true)...)
		}
		return errs
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, at := m[k], ptr+"/"+escapePtr(k)
		switch {
		case strings.HasPrefix(k, "x-"):
		case !schemaKeywords[k]:
			errs = append(errs, fmt.Errorf("%s: %q is not a schema keyword (a description with an unquoted comma?)", ptr, k))
		case k == "properties" || k == "patternProperties" || k == "$defs" || k == "dependentSchemas":
			errs = append(errs, unknownKeywords(v, at, false)...)
		case k == "items" || k == "additionalProperties" || k == "not" || k == "contains" || k == "propertyNames" ||
			k == "if" || k == "then" || k == "else" || k == "unevaluatedProperties" || k == "unevaluatedItems":
			errs = append(errs, unknownKeywords(v, at, true)...)
		case k == "allOf" || k == "anyOf" || k == "oneOf" || k == "prefixItems":
			if list, ok := v.([]any); ok {
				for i, e := range list {
					errs = append(errs, unknownKeywords(e, fmt.Sprintf("%s/%d", at, i), true)...)
				}
			}
		}
	}
	return errs
}

func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TestAPIContractRefuses: the contract check finds what it exists to find,
// in requests, answers and the document itself.
func TestAPIContractRefuses(t *testing.T) {
	raw, err := api.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	k, err := newAPIContract(raw)
	if err != nil {
		t.Fatalf("the served document: %v", err)
	}
	req := func(method, target, ctype string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		return r
	}
	jsonH := http.Header{"Content-Type": {"application/json"}}
	policy := `{"id":"branch","name":"Branch","default_action":{"decision":"permit"},` +
		`"created_at":"2026-12-04T10:00:00Z","updated_at":"2026-12-04T10:00:00Z"}`
	if errs := k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200, jsonH, []byte(policy)); len(errs) > 0 {
		t.Fatalf("a valid policy refused: %v", errs)
	}
	if errs := k.checkRequest(req("GET", "/api/v1/calls?limit=10", ""), nil); len(errs) > 0 {
		t.Fatalf("a valid query refused: %v", errs)
	}
	for _, c := range []struct {
		name string
		errs []string
		want string
	}{
		{"wrong type", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200, jsonH,
			[]byte(strings.Replace(policy, `"branch"`, `5`, 1))), "answer body"},
		{"bad date-time", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200, jsonH,
			[]byte(strings.Replace(policy, `2026-12-04T10:00:00Z`, `yesterday`, 1))), "answer body"},
		{"undocumented property", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200, jsonH,
			[]byte(strings.Replace(policy, `{`, `{"colour":"red",`, 1))), "answer body"},
		{"undocumented status", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 418, jsonH, nil), "status 418"},
		{"undocumented media type", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200,
			http.Header{"Content-Type": {"text/plain"}}, []byte(policy)), "media type text/plain"},
		{"not JSON", k.checkResponse(req("GET", "/api/v1/policies/branch", ""), 200, jsonH, []byte("{")), "not JSON"},
		{"query out of range", k.checkRequest(req("GET", "/api/v1/calls?limit=0", ""), nil), "limit"},
		{"query not a number", k.checkRequest(req("GET", "/api/v1/calls?limit=ten", ""), nil), "limit"},
		{"path enum", k.checkRequest(req("GET", "/api/v1/policies/branch/lists/grey/entries", ""), nil), "path parameter list"},
		{"body missing", k.checkRequest(req("PUT", "/api/v1/policies/branch", "application/json"), nil), "required"},
		{"body invalid", k.checkRequest(req("PUT", "/api/v1/policies/branch", "application/json"), []byte(`{"name":7}`)), "request body"},
		{"no operation", k.checkRequest(req("GET", "/api/v1/nosuch", ""), nil), "no documented operation"},
	} {
		if !strings.Contains(strings.Join(c.errs, "; "), c.want) {
			t.Errorf("%s: %q, want an error with %q", c.name, c.errs, c.want)
		}
	}

	for _, c := range []struct{ name, from, to string }{
		{"invalid schema", `"type": "object"`, `"type": "objekt"`},
		{"dangling $ref", `"#/components/schemas/Policy"`, `"#/components/schemas/Nope"`},
		{"not OpenAPI 3.1", `"openapi": "3.1.`, `"openapi": "2.0.`},
		{"text as a keyword", `"description": "What is wrong, for people."`, `"description": "What is wrong", "for people.": null`},
	} {
		broken := strings.Replace(string(raw), c.from, c.to, 1)
		if broken == string(raw) {
			t.Fatalf("%s: %q is not in the document", c.name, c.from)
		}
		if _, err := newAPIContract([]byte(broken)); err == nil {
			t.Errorf("%s: a broken document passed", c.name)
		}
	}
}
