package curri

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus")

func TestDecodeRequests(t *testing.T) {
	hello := callpolicy.Call{Calling: "9725550101", Called: "50102", TransformedCalling: "+19725550101",
		TransformedCalled: "+19725550102", TriggerPoint: "translationpattern"}
	tests := []struct {
		file   string
		want   callpolicy.Call
		reason string // expected DecodeError reason; "" = success
	}{
		{file: "cisco_hello_world.xml", want: hello},
		{file: "cisco_page_lowercase.xml", want: hello},
		{file: "namespace_prefixed.xml", want: hello},
		{file: "with_device_name.xml", want: callpolicy.Call{Calling: "+12028055054", Called: "88109",
			TransformedCalling: "+12028055054", TransformedCalled: "88109", TriggerPoint: "directorynumber", DeviceName: "CSR1000v"}},
		{file: "gve_capture.xml", want: callpolicy.Call{Calling: "5101", Called: "3222404993",
			TransformedCalling: "5101", TransformedCalled: "3222404993", TriggerPoint: "translationpattern"}},
		{file: "latin1_device_name.xml", want: callpolicy.Call{Calling: "2001", Called: "+4930123456",
			TransformedCalling: "+492001", TransformedCalled: "+4930123456", TriggerPoint: "directorynumber", DeviceName: "SEPCafé"}},
		{file: "cdata_value.xml", want: callpolicy.Call{Calling: "1000", Called: "2000",
			TransformedCalling: "+11000", TransformedCalled: "+12000", TriggerPoint: "translationpattern"}},
		{file: "bom_comments_entities.xml", want: callpolicy.Call{Calling: "4085550100", Called: "8005550199",
			TransformedCalling: "+14085550100", TransformedCalled: "+18005550199", TriggerPoint: "translationpattern", DeviceName: "SEP&00AB"}},
		{file: "no_transformed.xml", want: callpolicy.Call{Calling: "100", Called: "200"}},
		{file: "gve_tempXacmlReq.xml", want: callpolicy.Call{Calling: "5101", Called: "3222404993",
			TransformedCalling: "5101", TransformedCalled: "3222404993", TriggerPoint: "translationpattern"}},
		{file: "calltelemetry_load_test.xml", want: callpolicy.Call{Calling: "123", Called: "456",
			TriggerPoint: "translationpattern", DeviceName: "SEP1231231234"}},
		{file: "pgiralt_padded_calling.xml", want: callpolicy.Call{Calling: "+12125551001", Called: "5000"}},
		{file: "pgiralt_transformed_only.xml", want: callpolicy.Call{TransformedCalling: "+12125551001", Called: "5000"}},
		{file: "anonymous_withheld.xml", want: callpolicy.Call{Called: "50102", TransformedCalled: "+19725550102", TriggerPoint: "translationpattern"}},
		{file: "globalized_local_calling.xml", want: callpolicy.Call{Calling: "3222000111", Called: "50102",
			TransformedCalling: "+13222000111", TransformedCalled: "+19725550102", TriggerPoint: "translationpattern"}},
		{file: "duplicate_attribute.xml", want: hello},
		{file: "hostile_billion_laughs.xml", reason: ReasonDoctype},
		{file: "hostile_xxe.xml", reason: ReasonDoctype},
		{file: "broken_truncated.xml", reason: ReasonMalformed},
		{file: "broken_not_xml.txt", reason: ReasonMalformed},
		{file: "broken_empty.xml", reason: ReasonEmpty},
		{file: "broken_missing_called.xml", reason: ReasonMissingAttribute},
		{file: "broken_not_xacml.xml", reason: ReasonNotXACML},
		{file: "broken_mismatched_tag.xml", reason: ReasonMalformed},
		{file: "broken_bad_utf8.xml", reason: ReasonBadEncoding},
		{file: "broken_utf16_declared.xml", reason: ReasonBadEncoding},
	}
	files, _ := filepath.Glob("testdata/requests/*")
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Ext(f) == ".md" })
	if len(files) != len(tests) {
		t.Errorf("%d files in testdata/requests, %d in the table: keep them in step", len(files), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata/requests", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var got callpolicy.Call
			err = Decode(body, &got)
			if tc.reason != "" {
				var de *DecodeError
				if !errors.As(err, &de) || de.Reason != tc.reason {
					t.Fatalf("Decode error = %v, want reason %q", err, tc.reason)
				}
				if de.Msg == "" {
					t.Errorf("error %v has no message", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if got != tc.want {
					t.Fatalf("Decode = %+v\nwant     %+v", got, tc.want)
				}
			}
			// The oracle must agree on every golden file.
			var std callpolicy.Call
			stdErr := decodeStd(body, &std)
			if (stdErr == nil) != (tc.reason == "") || stdErr == nil && std != tc.want {
				t.Errorf("decodeStd = %+v, %v; want %+v, reason %q", std, stdErr, tc.want, tc.reason)
			}
			if *update {
				seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(body)) + ")\n"
				if err := os.WriteFile(filepath.Join("testdata/fuzz/FuzzDecode", strings.TrimSuffix(tc.file, filepath.Ext(tc.file))), []byte(seed), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeEdges covers lexical corners one at a time against both decoders.
func TestDecodeEdges(t *testing.T) {
	wrap := func(calling string) string {
		return `<Request><Subject><Attribute AttributeId="urn:Cisco:uc:1.0:callingnumber"><AttributeValue>` + calling +
			`</AttributeValue></Attribute><Attribute AttributeId="urn:Cisco:uc:1.0:callednumber"><AttributeValue>2</AttributeValue></Attribute></Subject></Request>`
	}
	tests := []struct {
		name, body string
		calling    string
		reason     string // "" = must succeed with calling
	}{
		{"entities", wrap("&lt;&gt;&amp;&apos;&quot;"), `<>&'"`, ""},
		{"char refs", wrap("&#43;&#x31;&#X32;"), "", ReasonMalformed},
		{"hex char ref", wrap("&#x2B;1"), "+1", ""},
		{"unknown entity", wrap("&nbsp;1"), "", ReasonMalformed},
		{"no semicolon", wrap("&amp 1"), "", ReasonMalformed},
		{"NUL char ref", wrap("&#0;1"), "", ReasonMalformed},
		{"surrogate char ref", wrap("&#xD800;"), "\uFFFD", ""},
		{"CRLF inside value", wrap("1\r\n2"), "1\n2", ""},
		{"split CDATA", wrap("1<![CDATA[<2>]]>3"), "1<2>3", ""},
		{"nested element text", wrap("1<x>2</x>3"), "123", ""},
		{"comment in value", wrap("1<!-- 9 -->2"), "12", ""},
		{"double dash comment", wrap("1<!-- a--b -->2"), "", ReasonMalformed},
		{"]]> in text", wrap("1]]>2"), "", ReasonMalformed},
		{"duplicate calling keeps the first", strings.Replace(wrap("1"), "<Subject>", `<Subject><Attribute AttributeId="urn:cisco:uc:1.0:CALLINGNUMBER"><AttributeValue>9</AttributeValue></Attribute>`, 1), "9", ""},
		{"duplicate empty calling keeps the first", strings.Replace(wrap("1"), "<Subject>", `<Subject><Attribute AttributeId="urn:Cisco:uc:1.0:callingnumber"><AttributeValue/></Attribute>`, 1), "", ""},
		{"absent calling is anonymous", strings.Replace(wrap("1"), "urn:Cisco:uc:1.0:callingnumber", "urn:Cisco:uc:1.0:callingdevicename", 1), "", ""},
		{"unknown Cisco attribute", strings.Replace(wrap("1"), "<Subject>", `<Subject><Attribute AttributeId="urn:Cisco:uc:1.0:callingpartyname"><AttributeValue>Alice</AttributeValue></Attribute>`, 1), "1", ""},
		{"padded value", wrap(" \t\n +4930123 \r\n"), "+4930123", ""},
		{"second root", wrap("1") + "<Request/>", "", ReasonMalformed},
		{"text after root", wrap("1") + "x", "", ReasonMalformed},
		{"whitespace char ref after root", wrap("1") + "&#32;\n", "1", ""},
		{"PI inside", strings.Replace(wrap("1"), "<Subject>", "<Subject><?cucm trace?>", 1), "1", ""},
		{"late xml declaration", " " + strings.Replace(wrap("1"), "<Request>", `<?xml version="1.0"?><Request>`, 1), "", ReasonMalformed},
		{"version 1.1", `<?xml version="1.1"?>` + wrap("1"), "", ReasonMalformed},
		{"unquoted attribute", strings.Replace(wrap("1"), `AttributeId="urn:Cisco:uc:1.0:callingnumber"`, "AttributeId=urn:Cisco:uc:1.0:callingnumber", 1), "", ReasonMalformed},
		{"two colons", strings.Replace(wrap("1"), "<Subject>", "<a:b:c/><Subject>", 1), "", ReasonMalformed},
		{"nested Attribute", strings.Replace(wrap("1"), "<AttributeValue>", "<Attribute/><AttributeValue>", 1), "", ReasonMalformed},
		{"deep nesting", "<Request>" + strings.Repeat("<a>", maxDepth) + strings.Repeat("</a>", maxDepth) + "</Request>", "", ReasonMalformed},
		{"lowercase doctype in comment", "<!-- <!doctype x> -->" + wrap("1"), "", ReasonDoctype},
		{"second AttributeValue ignored", strings.Replace(wrap("1"), "1</AttributeValue>", "1</AttributeValue><AttributeValue>7</AttributeValue>", 1), "1", ""},
		{"whitespace only", " \r\n\t", "", ReasonEmpty},
		{"BOM only", "\xEF\xBB\xBF", "", ReasonEmpty},
		{"blank calling is anonymous", wrap("  "), "", ""},
		{"unsupported charset", `<?xml version="1.0" encoding="Shift_JIS"?>` + wrap("1"), "", ReasonBadEncoding},
		{"latin1 value", `<?xml version='1.0' encoding='latin1'?>` + wrap("\xe91"), "é1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got, std callpolicy.Call
			err := Decode([]byte(tc.body), &got)
			stdErr := decodeStd([]byte(tc.body), &std)
			if tc.reason != "" {
				var de *DecodeError
				if !errors.As(err, &de) || de.Reason != tc.reason {
					t.Fatalf("Decode = %+v, %v; want reason %q", got, err, tc.reason)
				}
				if stdErr == nil {
					t.Errorf("decodeStd accepted what Decode refuses: %+v", std)
				}
				return
			}
			if err != nil || got.Calling != tc.calling || got.Called != "2" {
				t.Fatalf("Decode = %+v, %v; want calling %q", got, err, tc.calling)
			}
			if stdErr != nil || std != got {
				t.Errorf("decodeStd = %+v, %v; Decode = %+v", std, stdErr, got)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/requests/*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, std callpolicy.Call
		err := Decode(body, &got)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Reason == "" {
				t.Fatalf("error %v is not a *DecodeError with a reason", err)
			}
		}
		if stdErr := decodeStd(body, &std); stdErr != nil {
			return // the oracle refuses: Decode may refuse too, or be more lenient
		}
		if err != nil {
			t.Fatalf("encoding/xml accepts (%+v) but Decode refuses: %v", std, err)
		}
		if got != std {
			t.Fatalf("Decode   = %+v\ndecodeStd = %+v", got, std)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"cisco_hello_world.xml", "with_device_name.xml", "latin1_device_name.xml"} {
		body, err := os.ReadFile(filepath.Join("testdata/requests", name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.TrimSuffix(name, ".xml"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var c callpolicy.Call
			for b.Loop() {
				if err := Decode(body, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	body, _ := os.ReadFile("testdata/requests/cisco_hello_world.xml")
	b.Run("encoding_xml_oracle", func(b *testing.B) {
		b.ReportAllocs()
		var c callpolicy.Call
		for b.Loop() {
			if err := decodeStd(body, &c); err != nil {
				b.Fatal(fmt.Sprint(err))
			}
		}
	})
}

func TestDecodeReportsUnknownCiscoAttributes(t *testing.T) {
	body, err := os.ReadFile("testdata/requests/cisco_hello_world.xml")
	if err != nil {
		t.Fatal(err)
	}
	extra := `<Attribute AttributeId="urn:Cisco:uc:1.0:callingpartyname"><AttributeValue>Alice</AttributeValue></Attribute>` +
		`<Attribute AttributeId="urn:oasis:names:tc:xacml:1.0:subject:subject-id"><AttributeValue>x</AttributeValue></Attribute>` +
		`<Attribute AttributeId="URN:CISCO:UC:1.0:Verstat"><AttributeValue>TN-Validation-Passed</AttributeValue></Attribute>`
	body = []byte(strings.Replace(string(body), "</Subject>", extra+"</Subject>", 1))
	var c callpolicy.Call
	var u Unknown
	if err := DecodeRequest(body, &c, &u); err != nil {
		t.Fatal(err)
	}
	if u.N != 2 || string(u.IDs[0]) != "callingpartyname" || string(u.IDs[1]) != "Verstat" {
		t.Fatalf("unknown = %d %q %q; want callingpartyname and Verstat (not the OASIS attribute)", u.N, u.IDs[0], u.IDs[1])
	}
	if c.Calling != "9725550101" {
		t.Errorf("calling = %q", c.Calling)
	}
	// A plain request reports none, and the count is reset per request.
	plain, _ := os.ReadFile("testdata/requests/cisco_hello_world.xml")
	if err := DecodeRequest(plain, &c, &u); err != nil || u.N != 0 {
		t.Fatalf("plain request: N = %d, err %v", u.N, err)
	}
}
