// Package filter compiles a feed's filter expression (expr-lang syntax) over
// the fields of a message copy, or of a transaction record, into a predicate
// that is cheap to run on every copy.
//
// Only the fields an expression uses are extracted from each copy: the
// compiler walks the expression once and keeps the list. Comparisons of a
// field with constants (==, !=, <, <=, >, >=, in, contains, startsWith,
// endsWith) are evaluated natively and handed to the expression as booleans,
// so the usual filters box nothing per copy and allocate nothing; other uses
// of a field go through the expression VM with the value boxed.
package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/signalbox/signalbox/internal/datadirector/nfcopy"
	"github.com/signalbox/signalbox/internal/datadirector/xdr"
)

// MaxExprLen bounds the source of an expression.
const MaxExprLen = 8192

// maxNodes bounds the expression's syntax tree.
const maxNodes = 2000

// Error is an expression Compile refused. Line and Column (1-based, in
// characters) locate the problem when known, else they are 0.
type Error struct {
	Expr   string
	Line   int
	Column int
	Msg    string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("filter: %s", e.Msg)
	}
	return fmt.Sprintf("filter: line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

func toError(src string, err error) *Error {
	var fe *file.Error
	if errors.As(err, &fe) {
		msg := fe.Message
		if fe.Line == 0 {
			fe.Bind(file.NewSource(src))
		}
		return &Error{Expr: src, Line: fe.Line, Column: fe.Column + 1, Msg: msg}
	}
	// Errors about the whole expression (its result type) point at its start.
	return &Error{Expr: src, Line: 1, Column: 1, Msg: err.Error()}
}

// Filter is a compiled copy filter. It is immutable and safe for concurrent
// use.
type Filter struct {
	src    string
	prog   *vm.Program
	preds  []pred
	boxed  []boxedField // fields the VM reads directly
	hdrs   []hdrField   // header["name"] read directly
	allHdr bool         // header used as a whole map
	idWant xdr.IdentityKind
	pool   sync.Pool // *state
}

type boxedField struct {
	key string
	id  fieldID
}

type hdrField struct{ key, name string }

// state is one goroutine's evaluation scratch.
type state struct {
	vm  vm.VM
	env map[string]any
	x   extraction
	hdr map[string]string
}

// String returns the expression's source.
func (f *Filter) String() string { return f.src }

// Compile compiles a copy filter expression. It refuses, with an *Error,
// syntax errors, unknown fields, type errors and expressions that are not
// boolean.
func Compile(src string) (f *Filter, err error) {
	// The expression library is outside code: whatever it panics on is bad
	// input, and gets an error like any other.
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &Error{Expr: src, Line: 1, Column: 1, Msg: fmt.Sprint("cannot compile: ", r)}
		}
	}()
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Expr: src, Msg: "empty expression"}
	}
	if len(src) > MaxExprLen {
		return nil, &Error{Expr: src, Msg: fmt.Sprintf("expression longer than %d bytes", MaxExprLen)}
	}
	// Pass 1, on a throwaway tree: find the fields, headers and constant
	// comparisons, so the compile environment can declare them.
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, toError(src, err)
	}
	a := newAnalyzer()
	ast.Walk(&tree.Node, a)
	if a.err != nil {
		return nil, toError(src, a.err)
	}
	ast.Walk(&tree.Node, residual{a})

	f = &Filter{src: src, preds: a.preds, allHdr: a.allHdr || a.envUsed}
	env := make(map[string]any, int(nFields)+len(a.preds)+len(a.hdrKeys))
	for i := range fields {
		env[fields[i].name] = zeroOf(fields[i].kind)
	}
	for _, p := range a.preds {
		env[p.key] = false
	}
	for k := range a.hdrKeys {
		env[k] = ""
	}
	for id := range a.used {
		fid := fieldID(id)
		if !a.used[id] {
			continue
		}
		f.idWant |= fields[fid].ids
		if fid != fHeader {
			f.boxed = append(f.boxed, boxedField{fields[fid].name, fid})
		}
	}
	if a.envUsed { // $env reads anything: extract everything
		f.boxed = f.boxed[:0]
		for i := range fields {
			if fieldID(i) != fHeader {
				f.boxed = append(f.boxed, boxedField{fields[i].name, fieldID(i)})
			}
			f.idWant |= fields[i].ids
		}
	}
	for _, p := range a.preds {
		f.idWant |= fields[p.id].ids
	}
	for k, name := range a.hdrKeys {
		if a.hdrUsed[k] {
			f.hdrs = append(f.hdrs, hdrField{k, name})
		}
	}

	// Pass 2: compile, the same rewriting applied by a patcher.
	b := newAnalyzer()
	prog, err := expr.Compile(src, expr.Env(env), expr.AsBool(), expr.Patch(b), expr.MaxNodes(maxNodes))
	if err != nil {
		return nil, toError(src, err)
	}
	if len(b.preds) != len(a.preds) {
		return nil, &Error{Expr: src, Msg: "internal: rewriting was not repeatable"}
	}
	f.prog = prog
	f.pool.New = func() any {
		st := &state{env: make(map[string]any, len(env))}
		for k, v := range env {
			st.env[k] = v
		}
		if f.allHdr {
			st.hdr = make(map[string]string)
		}
		return st
	}
	return f, nil
}

func zeroOf(k kind) any {
	switch k {
	case kInt:
		return 0
	case kMap:
		return map[string]string{}
	}
	return ""
}

// Match reports whether c passes the filter. An expression that fails at run
// time (an index out of range, say) does not match; Eval reports the error.
func (f *Filter) Match(c *nfcopy.Copy) bool {
	ok, _ := f.Eval(c)
	return ok
}

// Eval evaluates the filter on c. c is only read, and not retained.
func (f *Filter) Eval(c *nfcopy.Copy) (bool, error) {
	st := f.pool.Get().(*state)
	x := &st.x
	x.reset(c, f.idWant)
	env := st.env
	for i := range f.preds {
		env[f.preds[i].key] = f.preds[i].eval(x)
	}
	for _, b := range f.boxed {
		if fields[b.id].kind == kInt {
			env[b.key] = x.num(b.id)
		} else {
			env[b.key] = x.str(b.id)
		}
	}
	for _, h := range f.hdrs {
		env[h.key] = c.Header(h.name)
	}
	if f.allHdr {
		clear(st.hdr)
		headerMap(c, st.hdr)
		env["header"] = st.hdr
	}
	out, err := st.vm.Run(f.prog, env)
	// Drop what aliases c before pooling the state.
	for _, b := range f.boxed {
		if fields[b.id].kind == kString {
			env[b.key] = ""
		}
	}
	for _, h := range f.hdrs {
		env[h.key] = ""
	}
	if f.allHdr {
		clear(st.hdr)
	}
	x.c = nil
	x.ids.Reset()
	f.pool.Put(st)
	if err != nil {
		return false, fmt.Errorf("filter %q: %w", f.src, err)
	}
	ok, _ := out.(bool)
	return ok, nil
}
