package filter

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
)

// analyzer rewrites a parsed expression for cheap evaluation: header["x"]
// becomes an environment key of its own, and a comparison of a field with
// constants becomes a boolean key computed natively (pred). It walks in
// post-order (children first), so a header access is already a key when its
// comparison is seen.
type analyzer struct {
	preds   []pred
	hdrKeys map[string]string // env key → header name
	err     *file.Error

	// Filled by the residual walk over the rewritten tree.
	used    [nFields]bool
	hdrUsed map[string]bool
	allHdr  bool
	envUsed bool
}

func newAnalyzer() *analyzer {
	return &analyzer{hdrKeys: map[string]string{}, hdrUsed: map[string]bool{}}
}

const hdrPrefix = "header:"

// diameterPrefix names the Diameter fields: diameter.app_id is one field,
// not a member of a map.
const diameterPrefix = "diameter"

// diameterField turns diameter.x into the field of that name.
func (a *analyzer) diameterField(n *ast.Node, v *ast.MemberNode) {
	s, ok := v.Property.(*ast.StringNode)
	name := ""
	if ok {
		name = diameterPrefix + "." + s.Value
	}
	if _, known := fieldByName[name]; known && !v.Optional {
		ast.Patch(n, &ast.IdentifierNode{Value: name})
		return
	}
	if a.err == nil {
		var known []string
		for i := range fields {
			if strings.HasPrefix(fields[i].name, diameterPrefix+".") {
				known = append(known, strings.TrimPrefix(fields[i].name, diameterPrefix+"."))
			}
		}
		what := "diameter.<name>"
		if ok {
			what = name
		}
		a.err = &file.Error{Location: v.Location(), Message: fmt.Sprintf("unknown Diameter field %q (known: %s)", what, strings.Join(known, ", "))}
	}
}

func (a *analyzer) Visit(n *ast.Node) {
	switch v := (*n).(type) {
	case *ast.VariableDeclaratorNode:
		if _, ok := fieldByName[v.Name]; ok && a.err == nil {
			a.err = &file.Error{Location: v.Location(), Message: fmt.Sprintf("variable %q shadows a field", v.Name)}
		}
	case *ast.MemberNode:
		id, ok := v.Node.(*ast.IdentifierNode)
		if ok && id.Value == diameterPrefix {
			a.diameterField(n, v)
			return
		}
		if !ok || id.Value != "header" {
			return
		}
		if s, ok := v.Property.(*ast.StringNode); ok {
			name := strings.ToLower(s.Value)
			key := hdrPrefix + name
			a.hdrKeys[key] = name
			ast.Patch(n, &ast.IdentifierNode{Value: key})
		}
	case *ast.BinaryNode:
		if p, ok := a.predicate(v); ok {
			p.key = "pred:" + strconv.Itoa(len(a.preds))
			a.preds = append(a.preds, p)
			ast.Patch(n, &ast.IdentifierNode{Value: p.key})
		}
	}
}

// operand reports the field (or header) an identifier names.
func (a *analyzer) operand(n ast.Node) (id fieldID, hdr string, ok bool) {
	ident, isIdent := n.(*ast.IdentifierNode)
	if !isIdent {
		return 0, "", false
	}
	if name, isHdr := a.hdrKeys[ident.Value]; isHdr {
		return fHeader, name, true
	}
	id, ok = fieldByName[ident.Value]
	if !ok || fields[id].kind == kMap {
		return 0, "", false
	}
	return id, "", true
}

var flipped = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

func (a *analyzer) predicate(b *ast.BinaryNode) (pred, bool) {
	op := b.Operator
	left, right := b.Left, b.Right
	id, hdr, ok := a.operand(left)
	if !ok {
		// constant OP field, for the symmetric and ordered operators.
		if _, flip := flipped[op]; !flip {
			return pred{}, false
		}
		if id, hdr, ok = a.operand(right); !ok {
			return pred{}, false
		}
		op, right = flipped[op], left
	}
	p := pred{id: id, hdr: hdr, op: op}
	isStr := hdr != "" || fields[id].kind == kString
	switch c := right.(type) {
	case *ast.StringNode:
		if !isStr {
			return pred{}, false
		}
		switch op {
		case "==", "!=", "<", "<=", ">", ">=", "contains", "startsWith", "endsWith":
			p.s = c.Value
			return p, true
		}
	case *ast.IntegerNode:
		if isStr {
			return pred{}, false
		}
		switch op {
		case "==", "!=", "<", "<=", ">", ">=":
			p.n = c.Value
			return p, true
		}
	case *ast.ArrayNode:
		if op != "in" {
			return pred{}, false
		}
		for _, e := range c.Nodes {
			switch v := e.(type) {
			case *ast.StringNode:
				if !isStr {
					return pred{}, false
				}
				p.strs = append(p.strs, v.Value)
			case *ast.IntegerNode:
				if isStr {
					return pred{}, false
				}
				p.ints = append(p.ints, v.Value)
			default:
				return pred{}, false
			}
		}
		return p, true
	}
	return pred{}, false
}

// residual records the fields the rewritten expression still reads itself.
type residual struct{ a *analyzer }

func (r residual) Visit(n *ast.Node) {
	ident, ok := (*n).(*ast.IdentifierNode)
	if !ok {
		return
	}
	switch {
	case ident.Value == "$env":
		r.a.envUsed = true
	case strings.HasPrefix(ident.Value, hdrPrefix):
		r.a.hdrUsed[ident.Value] = true
	default:
		if id, ok := fieldByName[ident.Value]; ok {
			r.a.used[id] = true
			if id == fHeader {
				r.a.allHdr = true
			}
		}
	}
}

// pred is a field compared with constants, evaluated without the VM.
type pred struct {
	key  string
	id   fieldID
	hdr  string // header name when id is fHeader
	op   string
	s    string
	n    int
	strs []string
	ints []int
}

func (p *pred) eval(x *extraction) bool {
	if p.hdr != "" || fields[p.id].kind == kString {
		var v string
		if p.hdr != "" {
			v = x.c.Header(p.hdr)
		} else {
			v = x.str(p.id)
		}
		switch p.op {
		case "==":
			return v == p.s
		case "!=":
			return v != p.s
		case "<":
			return v < p.s
		case "<=":
			return v <= p.s
		case ">":
			return v > p.s
		case ">=":
			return v >= p.s
		case "contains":
			return strings.Contains(v, p.s)
		case "startsWith":
			return strings.HasPrefix(v, p.s)
		case "endsWith":
			return strings.HasSuffix(v, p.s)
		case "in":
			for _, s := range p.strs {
				if v == s {
					return true
				}
			}
		}
		return false
	}
	v := x.num(p.id)
	switch p.op {
	case "==":
		return v == p.n
	case "!=":
		return v != p.n
	case "<":
		return v < p.n
	case "<=":
		return v <= p.n
	case ">":
		return v > p.n
	case ">=":
		return v >= p.n
	case "in":
		for _, n := range p.ints {
			if v == n {
				return true
			}
		}
	}
	return false
}

type identSet map[string]bool

func (s identSet) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		s[id.Value] = true
	}
}

func walkIdents(n *ast.Node, s identSet) { ast.Walk(n, s) }
