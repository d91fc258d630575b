package filter

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// recordFields are the fields of record filter expressions, with a sample
// value of their type.
var recordFields = []structField[xdr.Record]{
	{"correlation_id", "", "correlation-id of the transaction", func(r *xdr.Record) any { return r.CorrelationID }},
	{"service", "", "SBI service, e.g. nudm-ueau", func(r *xdr.Record) any { return r.Service }},
	{"api_version", "", "API version, e.g. v1", func(r *xdr.Record) any { return r.APIVersion }},
	{"method", "", "HTTP method of the request", func(r *xdr.Record) any { return r.Method }},
	{"path", "", "request :path", func(r *xdr.Record) any { return r.Path }},
	{"status", 0, "HTTP status of the final response; 0 without a response", func(r *xdr.Record) any { return r.Status }},
	{"status_class", "", "1xx..5xx, timeout (response_timeout) or other", func(r *xdr.Record) any { return r.StatusClass() }},
	{"result", "", "complete, partial, response_timeout or orphan_response", func(r *xdr.Record) any { return r.Result }},
	{"cause", "", "ProblemDetails cause of a failed response, e.g. USER_NOT_FOUND", func(r *xdr.Record) any { return r.Cause }},
	{"producer", "", "the producer NF instance (id, else FQDN)", func(r *xdr.Record) any { return r.Producer }},
	{"plmn", "", "a SEPP transaction's roaming partner PLMN, MCC-MNC", func(r *xdr.Record) any { return r.PLMN }},
	{"nf_types", []string{}, "distinct NF types that copied the transaction, in hop order", func(r *xdr.Record) any { return r.NFTypes() }},
	{"nf_type", "", "NF type that first saw the request (the first hop)", func(r *xdr.Record) any {
		if len(r.HopLatencies) > 0 {
			return r.HopLatencies[0].NFType
		}
		return ""
	}},
	{"hops", 0, "number of distinct copies joined (same as copies)", func(r *xdr.Record) any { return len(r.Hops) }},
	{"copies", 0, "number of distinct copies joined", func(r *xdr.Record) any { return r.Copies }},
	{"duplicates", 0, "duplicate copies dropped", func(r *xdr.Record) any { return r.Duplicates }},
	{"supi", "", "SUPI (imsi-...)", func(r *xdr.Record) any { return r.SUPI }},
	{"suci", "", "SUCI (suci-...)", func(r *xdr.Record) any { return r.SUCI }},
	{"gpsi", "", "GPSI (msisdn-...)", func(r *xdr.Record) any { return r.GPSI }},
	{"pei", "", "PEI (imei-... or imeisv-...)", func(r *xdr.Record) any { return r.PEI }},
	{"dnn", "", "DNN", func(r *xdr.Record) any { return r.DNN }},
	{"snssai", "", "S-NSSAI as sst or sst-sd", func(r *xdr.Record) any { return r.SNSSAI }},
	{"latency_ms", 0.0, "transaction latency in milliseconds (float)", func(r *xdr.Record) any { return float64(r.LatencyNs) / 1e6 }},
	{"request_size", 0, "request body bytes", func(r *xdr.Record) any { return r.RequestSize }},
	{"response_size", 0, "response body bytes", func(r *xdr.Record) any { return r.ResponseSize }},
	{"evicted", false, "emitted early because the correlator was full", func(r *xdr.Record) any { return r.Evicted }},
}

// RecordFields lists the fields of record filter expressions.
func RecordFields() []FieldDoc { return fieldDocs(recordFields) }

// RecordFilter is a compiled filter over transaction records (xdr feeds). It
// is immutable and safe for concurrent use. Records are far fewer than
// copies, so it builds the environment of the fields used per record rather
// than rewriting comparisons.
type RecordFilter struct{ structFilter[xdr.Record] }

// CompileRecord compiles a record filter expression, refusing what Compile
// refuses.
func CompileRecord(src string) (*RecordFilter, error) {
	f, err := compileStruct(src, recordFields)
	if err != nil {
		return nil, err
	}
	return &RecordFilter{f}, nil
}

// Eval evaluates the filter on r.
func (f *RecordFilter) Eval(r *xdr.Record) (bool, error) {
	ok, err := f.eval(r)
	if err != nil {
		return false, fmt.Errorf("record filter %q: %w", f.src, err)
	}
	return ok, nil
}

// Match reports whether r passes the filter; a run-time error does not match.
func (f *RecordFilter) Match(r *xdr.Record) bool {
	ok, _ := f.Eval(r)
	return ok
}

// structField is a field of filter expressions over records of type T,
// with a sample value of its type.
type structField[T any] struct {
	name string
	zero any
	doc  string
	get  func(r *T) any
}

func fieldDocs[T any](fields []structField[T]) []FieldDoc {
	out := make([]FieldDoc, 0, len(fields))
	for _, f := range fields {
		out = append(out, FieldDoc{Name: f.name, Type: fmt.Sprintf("%T", f.zero), Description: f.doc})
	}
	return out
}

// structFilter is a filter expression over records of type T whose fields
// are listed: the environment holds only the fields the expression uses.
type structFilter[T any] struct {
	src    string
	prog   *vm.Program
	fields []structField[T]
	used   []int // indexes into fields
}

// String returns the expression's source.
func (f *structFilter[T]) String() string { return f.src }

func compileStruct[T any](src string, fields []structField[T]) (structFilter[T], error) {
	f := structFilter[T]{src: src, fields: fields}
	if strings.TrimSpace(src) == "" {
		return f, &Error{Expr: src, Msg: "empty expression"}
	}
	if len(src) > MaxExprLen {
		return f, &Error{Expr: src, Msg: fmt.Sprintf("expression longer than %d bytes", MaxExprLen)}
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return f, toError(src, err)
	}
	idents := identSet{}
	walkIdents(&tree.Node, idents)
	env := make(map[string]any, len(fields))
	for i, sf := range fields {
		env[sf.name] = sf.zero
		if idents[sf.name] || idents["$env"] {
			f.used = append(f.used, i)
		}
	}
	if f.prog, err = expr.Compile(src, expr.Env(env), expr.AsBool(), expr.MaxNodes(maxNodes)); err != nil {
		return f, toError(src, err)
	}
	return f, nil
}

func (f *structFilter[T]) eval(r *T) (bool, error) {
	env := make(map[string]any, len(f.used))
	for _, i := range f.used {
		env[f.fields[i].name] = f.fields[i].get(r)
	}
	out, err := expr.Run(f.prog, env)
	if err != nil {
		return false, err
	}
	ok, _ := out.(bool)
	return ok, nil
}
