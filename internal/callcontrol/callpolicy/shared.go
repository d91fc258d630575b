package callpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

// Library is what policies share, compiled once: caller-name directories,
// shared block and allow lists, and number groups. A Snapshot is compiled
// against one Library; a change to any of it recompiles the policies
// (group expansion and which shared lists apply are part of a policy).
type Library struct {
	dirs   map[string]*dirRef
	shared []*CompiledList         // block and allow lists, by id
	groups map[string]*groupValues // expanded, by id
}

// CompiledList is one shared list compiled on its own, so that a list
// whose version did not change is not compiled again.
type CompiledList struct {
	list     SharedList
	entries  entryList // block/allow
	values   []string  // group: the entries' values, nested groups unexpanded
	policies map[string]bool
}

// Version is the list's version when compiled.
func (c *CompiledList) Version() int64 { return c.list.Version }

// ID is the list's id.
func (c *CompiledList) ID() string { return c.list.ID }

type groupValues struct {
	vals []string
}

// MaxGroupValues bounds a group once nested groups are expanded, and
// MaxRuleRows the matcher rows one rule expands to (the product of its
// groups' sizes).
const (
	MaxGroupValues = 1_000_000
	MaxRuleRows    = 100_000
)

// ValidateSharedList checks a shared list's settable fields.
func ValidateSharedList(l *SharedList) error {
	if !rePolicyID.MatchString(l.ID) {
		return fieldErr("id", "%q is not a slug (a-z 0-9 _ -, starting with a letter or digit, at most 64)", l.ID)
	}
	if strings.TrimSpace(l.Name) == "" {
		return fieldErr("name", "required")
	}
	if len(l.Name) > 256 {
		return fieldErr("name", "longer than 256 bytes")
	}
	if len(l.Description) > 1024 {
		return fieldErr("description", "longer than 1024 bytes")
	}
	switch l.Kind {
	case AllowList, BlockList:
		if l.Action != nil {
			if err := validateAction("action.", l.Action); err != nil {
				return err
			}
		}
	case GroupList:
		if l.Action != nil {
			return fieldErr("action", "a group has no action: rules that match it do")
		}
		if len(l.Policies) > 0 {
			return fieldErr("policies", "a group applies to no policy: rules name it with group:%s", l.ID)
		}
	default:
		return fieldErr("kind", "%q is not block, allow or group", l.Kind)
	}
	for i, p := range l.Policies {
		if err := ValidatePolicyID(p); err != nil {
			return fieldErr(fmt.Sprintf("policies[%d]", i), "%s", err)
		}
	}
	return nil
}

// ValidateSharedEntry checks an entry of a shared list of kind.
func ValidateSharedEntry(kind ListKind, e *ListEntry) error {
	if kind != GroupList {
		return ValidateEntry(e)
	}
	if e.Calling == "" {
		return fieldErr("calling", "required")
	}
	if id, ok := strings.CutPrefix(e.Calling, GroupPrefix); ok {
		if !rePolicyID.MatchString(id) {
			return fieldErr("calling", "%q is not a group id", id)
		}
	} else if err := parseField(ruleFields()[0], e.Calling); err != nil {
		return fieldErr("calling", "%s", err)
	}
	switch {
	case e.Called != "":
		return fieldErr("called", "a group entry is one number, prefix or pattern: put it in calling")
	case e.ExpiresAt != nil:
		return fieldErr("expires_at", "group entries do not expire; delete the entry instead")
	case e.Action != nil:
		return fieldErr("action", "a group entry has no action: rules that match the group do")
	case len(e.Note) > 1024:
		return fieldErr("note", "longer than 1024 bytes")
	}
	return nil
}

// CompileSharedList validates and compiles one shared list.
func CompileSharedList(cfg *SharedListConfig) (*CompiledList, error) {
	l := &cfg.List
	if err := ValidateSharedList(l); err != nil {
		return nil, fmt.Errorf("shared list %q: %w", l.ID, err)
	}
	c := &CompiledList{list: *l}
	if len(l.Policies) > 0 {
		c.policies = make(map[string]bool, len(l.Policies))
		for _, p := range l.Policies {
			c.policies[p] = true
		}
	}
	for i := range cfg.Entries {
		if err := ValidateSharedEntry(l.Kind, &cfg.Entries[i]); err != nil {
			return nil, fmt.Errorf("shared list %q: entry %d: %w", l.ID, cfg.Entries[i].ID, err)
		}
	}
	if l.Kind == GroupList {
		c.values = make([]string, len(cfg.Entries))
		for i := range cfg.Entries {
			c.values[i] = cfg.Entries[i].Calling
		}
		return c, nil
	}
	var actions actionSet
	var err error
	if c.entries, err = compileList(l.Kind, cfg.Entries, l.Action, &actions); err != nil {
		return nil, fmt.Errorf("shared list %q: %w", l.ID, err)
	}
	for i := range c.entries.entries {
		en := &c.entries.entries[i]
		en.reason = strings.Replace(en.reason, string(l.Kind)+" list entry", "shared "+string(l.Kind)+" list "+l.ID+" entry", 1)
	}
	return c, nil
}

// NewLibrary puts compiled directories and shared lists together,
// expanding nested groups; a group loop is an error naming it.
func NewLibrary(dirs []*directory.Table, lists []*CompiledList) (*Library, error) {
	lib := &Library{dirs: make(map[string]*dirRef, len(dirs)), groups: map[string]*groupValues{}}
	for _, t := range dirs {
		lib.dirs[t.ID()] = &dirRef{t: t}
	}
	groups := map[string]*CompiledList{}
	for _, c := range lists {
		if c.list.Kind == GroupList {
			groups[c.list.ID] = c
		} else {
			lib.shared = append(lib.shared, c)
		}
	}
	slices.SortFunc(lib.shared, func(a, b *CompiledList) int { return strings.Compare(a.list.ID, b.list.ID) })
	for id := range groups {
		if _, err := lib.expand(groups, id, nil); err != nil {
			return nil, err
		}
	}
	return lib, nil
}

// expand returns group id's values with nested groups expanded; path is
// the chain of groups being expanded, to find loops.
func (lib *Library) expand(groups map[string]*CompiledList, id string, path []string) ([]string, error) {
	if g, ok := lib.groups[id]; ok {
		return g.vals, nil
	}
	if i := slices.Index(path, id); i >= 0 {
		return nil, &FieldError{Field: "calling", Msg: fmt.Sprintf("group loop: %s", strings.Join(append(path[i:], id), " → "))}
	}
	c, ok := groups[id]
	if !ok {
		return nil, &FieldError{Field: "calling", Msg: fmt.Sprintf("group %q does not exist", id)}
	}
	path = append(path, id)
	var out []string
	seen := map[string]bool{}
	for _, v := range c.values {
		sub := []string{v}
		if gid, ok := strings.CutPrefix(v, GroupPrefix); ok {
			var err error
			if sub, err = lib.expand(groups, gid, path); err != nil {
				if len(path) == 1 {
					return nil, fmt.Errorf("group %q: %w", id, err)
				}
				return nil, err
			}
		}
		for _, s := range sub {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		if len(out) > MaxGroupValues {
			return nil, fmt.Errorf("group %q: more than %d numbers once nested groups are expanded", id, MaxGroupValues)
		}
	}
	lib.groups[id] = &groupValues{vals: out}
	return out, nil
}

// Group returns a group's numbers, nested groups expanded (tests, dry runs).
func (lib *Library) Group(id string) []string {
	if g := lib.groups[id]; g != nil {
		return g.vals
	}
	return nil
}

// sharedFor returns the shared lists of kind that apply to policy id.
func (lib *Library) sharedFor(id string, kind ListKind) []*CompiledList {
	if lib == nil {
		return nil
	}
	var out []*CompiledList
	for _, c := range lib.shared {
		if c.list.Kind == kind && (c.policies == nil || c.policies[id]) && c.entries.matcher != nil {
			out = append(out, c)
		}
	}
	return out
}

// GroupRefs lists the groups a rule's match names, by field.
func GroupRefs(r *Rule) [][2]string {
	var out [][2]string
	for f, v := range r.Match.values() {
		if id, ok := strings.CutPrefix(v, GroupPrefix); ok {
			out = append(out, [2]string{"match." + ruleFieldNames[f], id})
		}
	}
	return out
}
