package match

import "slices"

// trie is an automaton over bytes for prefix and dial-pattern conditions.
// Literal bytes are edges on the byte; pattern classes are edges on a
// dial-alphabet mask; ! is a class edge into a node that loops on its mask.
// Prefixes and patterns with common beginnings share nodes, so a value is
// walked once for all of them.
type trie struct {
	nodes []tnode
	edges []tedge // flattened by finish; building uses tnode.build
}

type tnode struct {
	edgeLo, edgeHi int32
	self           uint32  // symbols this node loops on (after a !)
	prefixRules    []int32 // rules whose prefix ends here, ascending
	endRules       []int32 // rules whose pattern ends here, ascending
	build          []tedge
}

type tedge struct {
	lit   byte
	bang  bool
	mask  uint32 // 0: literal edge on lit
	child int32
}

func (t *trie) init() { t.nodes = []tnode{{}} }

func (t *trie) child(n int32, e tedge) int32 {
	for _, x := range t.nodes[n].build {
		if x.lit == e.lit && x.mask == e.mask && x.bang == e.bang {
			return x.child
		}
	}
	c := int32(len(t.nodes))
	nd := tnode{}
	if e.bang {
		nd.self = e.mask
	}
	t.nodes = append(t.nodes, nd)
	e.child = c
	t.nodes[n].build = append(t.nodes[n].build, e)
	return c
}

func (t *trie) addPrefix(p string, rank int32) {
	n := int32(0)
	for i := 0; i < len(p); i++ {
		n = t.child(n, tedge{lit: p[i]})
	}
	t.nodes[n].prefixRules = append(t.nodes[n].prefixRules, rank)
}

func (t *trie) addPattern(toks []tok, rank int32) {
	n := int32(0)
	for _, k := range toks {
		if !k.bang && k.mask&(k.mask-1) == 0 {
			// A single symbol: share the literal edge with prefixes.
			n = t.child(n, tedge{lit: symChars[trailingBit(k.mask)]})
			continue
		}
		n = t.child(n, tedge{mask: k.mask, bang: k.bang})
	}
	t.nodes[n].endRules = append(t.nodes[n].endRules, rank)
}

func trailingBit(m uint32) int {
	i := 0
	for m&1 == 0 {
		m >>= 1
		i++
	}
	return i
}

// finish flattens edges into one array and sorts rule lists by rank
// (they are appended in rank order already; sorting keeps that a
// property of the structure rather than of the caller).
func (t *trie) finish() {
	total := 0
	for i := range t.nodes {
		total += len(t.nodes[i].build)
	}
	t.edges = make([]tedge, 0, total)
	for i := range t.nodes {
		nd := &t.nodes[i]
		nd.edgeLo = int32(len(t.edges))
		t.edges = append(t.edges, nd.build...)
		nd.edgeHi = int32(len(t.edges))
		nd.build = nil
		slices.Sort(nd.prefixRules)
		slices.Sort(nd.endRules)
	}
}
