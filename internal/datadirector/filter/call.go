package filter

import (
	"github.com/signalbox/signalbox/internal/callcontrol/callrecord"
)

// callFields are the fields of call filter expressions (feeds of the CALLS
// topic), with a sample value of their type.
var callFields = []structField[callrecord.Record]{
	{"policy", "", "the CURRI policy that answered", func(r *callrecord.Record) any { return r.Policy }},
	{"decision", "", "permit, deny, divert or indeterminate", func(r *callrecord.Record) any { return r.Decision }},
	{"step", "", "allow_list, block_list, rate_limit, rule or default (empty for indeterminate)", func(r *callrecord.Record) any { return r.Step }},
	{"rule_id", 0, "the rule that decided; 0 for other steps", func(r *callrecord.Record) any { return int(r.RuleID) }},
	{"entry_id", 0, "the list entry that decided; 0 for other steps", func(r *callrecord.Record) any { return int(r.EntryID) }},
	{"calling", "", "calling number as CUCM sent it", func(r *callrecord.Record) any { return r.Calling }},
	{"called", "", "called number", func(r *callrecord.Record) any { return r.Called }},
	{"transformed_calling", "", "calling number after CUCM's transformations", func(r *callrecord.Record) any { return r.TransformedCalling }},
	{"transformed_called", "", "called number after CUCM's transformations", func(r *callrecord.Record) any { return r.TransformedCalled }},
	{"trigger_point", "", "CUCM's trigger point (translationpattern, directorynumber, ...)", func(r *callrecord.Record) any { return r.TriggerPoint }},
	{"device_name", "", "the calling device", func(r *callrecord.Record) any { return r.DeviceName }},
	{"sent", "", "what CUCM was told, in short (continue, reject reason=blocked, divert 8000 ...)", func(r *callrecord.Record) any { return r.Sent }},
	{"error", "", "why the answer was indeterminate", func(r *callrecord.Record) any { return r.Error }},
	{"latency_us", 0, "request in to answer flushed, microseconds", func(r *callrecord.Record) any { return int(r.LatencyMicros) }},
	{"node", "", "the signalbox node that answered", func(r *callrecord.Record) any { return r.Node }},
	{"client", "", "the CUCM node, host:port", func(r *callrecord.Record) any { return r.Client }},
}

// CallFields lists the fields of call filter expressions.
func CallFields() []FieldDoc { return fieldDocs(callFields) }

// CallFilter is a compiled filter over call records. It is immutable and
// safe for concurrent use.
type CallFilter struct {
	structFilter[callrecord.Record]
}

// CompileCall compiles a call filter expression, refusing what Compile
// refuses and fields calls do not have.
func CompileCall(src string) (*CallFilter, error) {
	f, err := compileStruct(src, callFields)
	if err != nil {
		return nil, err
	}
	return &CallFilter{f}, nil
}

// Match reports whether r passes the filter; a run-time error does not match.
func (f *CallFilter) Match(r *callrecord.Record) bool {
	ok, _ := f.eval(r)
	return ok
}
