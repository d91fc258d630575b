package directory

import (
	"fmt"
	"hash/maphash"
	"maps"
	"math/bits"
	"runtime"
	"strings"
)

// Table is a compiled directory: exact numbers and prefixes, each in an
// open-addressing hash table of entry indexes into one string arena. It
// holds no pointers but the arena's, so the garbage collector does not walk
// a million entries on every cycle, and it costs about 16 bytes an entry
// beyond the numbers' and names' own bytes. Immutable once built; safe for
// any number of readers.
type Table struct {
	id         string
	fallback   string
	arena      string // number then name, per entry
	ents       []ent
	exact      []uint32 // entry index + 1; 0 is empty; len is a power of two
	prefix     []uint32
	prefixLens uint64 // bit n set: some prefix entry is n bytes long
	seed       maphash.Seed
	version    int64
	// over holds the changes made since the arrays above were built
	// (With): small maps beside the big table, folded in by the next build.
	over *overlay
}

// overlay is a table's entries added, renamed or removed since it was
// built.
type overlay struct {
	exact, prefix map[string]string // entries added or renamed: number → name
	gone          map[Key]struct{}  // entries of the built table removed or renamed
	lens          uint64            // prefix lengths among prefix
}

type ent struct {
	off        uint32
	nlen, mlen uint8
	prefix     bool // a prefix entry (else exact)
}

// Hit is a directory lookup's result: the name, the entry it came from and
// the form of the calling number it matched.
type Hit struct {
	Name   string
	Number string // the entry's number or prefix
	Prefix bool
	Form   string // "calling" or "transformed_calling"; "" for the fallback
}

// ID is the directory's id.
func (t *Table) ID() string { return t.id }

// Version is the config version the table was built from.
func (t *Table) Version() int64 { return t.version }

// Len is the number of entries.
func (t *Table) Len() int {
	if o := t.over; o != nil {
		return len(t.ents) - len(o.gone) + len(o.exact) + len(o.prefix)
	}
	return len(t.ents)
}

// Fallback is the name sent on a miss ("" leaves the name alone).
func (t *Table) Fallback() string { return t.fallback }

// Bytes is roughly how much memory the table holds.
func (t *Table) Bytes() int {
	return len(t.arena) + 8*len(t.ents) + 4*(len(t.exact)+len(t.prefix))
}

func (t *Table) number(i uint32) string {
	e := &t.ents[i]
	return t.arena[e.off : e.off+uint32(e.nlen)]
}

func (t *Table) name(i uint32) string {
	e := &t.ents[i]
	s := e.off + uint32(e.nlen)
	return t.arena[s : s+uint32(e.mlen)]
}

// find returns the index+1 of number in slots, or 0.
func (t *Table) find(slots []uint32, number string) uint32 {
	if len(slots) == 0 {
		return 0
	}
	mask := uint64(len(slots) - 1)
	h := maphash.String(t.seed, number) & mask
	for {
		k := slots[h]
		if k == 0 {
			return 0
		}
		if t.number(k-1) == number {
			return k
		}
		h = (h + 1) & mask
	}
}

// Lookup finds number: its exact entry, else its longest prefix entry.
func (t *Table) Lookup(number string) (Hit, bool) {
	if number == "" {
		return Hit{}, false
	}
	if h, ok := t.lookupExact(number); ok {
		return h, true
	}
	return t.lookupPrefix(number)
}

// lookupExact finds number's exact entry.
func (t *Table) lookupExact(number string) (Hit, bool) {
	if o := t.over; o != nil {
		if name, ok := o.exact[number]; ok {
			return Hit{Name: name, Number: number}, true
		}
		if _, gone := o.gone[Key{Number: number}]; gone {
			return Hit{}, false
		}
	}
	if k := t.find(t.exact, number); k != 0 {
		return Hit{Name: t.name(k - 1), Number: number}, true
	}
	return Hit{}, false
}

func (t *Table) lookupPrefix(number string) (Hit, bool) {
	lens := t.prefixLens
	o := t.over
	if o != nil {
		lens |= o.lens
	}
	if len(number) < 64 {
		lens &= (uint64(1) << (len(number) + 1)) - 1
	}
	for lens != 0 {
		n := 63 - bits.LeadingZeros64(lens)
		lens &^= 1 << n
		if o != nil {
			if name, ok := o.prefix[number[:n]]; ok {
				return Hit{Name: name, Number: number[:n], Prefix: true}, true
			}
			if _, gone := o.gone[Key{Number: number[:n], Prefix: true}]; gone {
				continue
			}
		}
		if k := t.find(t.prefix, number[:n]); k != 0 {
			return Hit{Name: t.name(k - 1), Number: t.number(k - 1), Prefix: true}, true
		}
	}
	return Hit{}, false
}

// With returns the table with entries upserted (added, or renamed) and
// keys deleted (a key in one of the two only), as of directory d (its version and fallback name), without
// rebuilding it: the changes sit in small maps beside the built table.
// false when the changes held would be more than a twentieth of the table
// (at least 4,096): then build it again.
func (t *Table) With(d *Directory, upserts []Entry, deletes []Key) (*Table, bool) {
	o := &overlay{exact: map[string]string{}, prefix: map[string]string{}, gone: map[Key]struct{}{}}
	if old := t.over; old != nil {
		o.exact, o.prefix, o.gone, o.lens = maps.Clone(old.exact), maps.Clone(old.prefix), maps.Clone(old.gone), old.lens
	}
	inBase := func(k Key) bool {
		if k.Prefix {
			return t.find(t.prefix, k.Number) != 0
		}
		return t.find(t.exact, k.Number) != 0
	}
	for _, k := range deletes {
		if k.Prefix {
			delete(o.prefix, k.Number)
		} else {
			delete(o.exact, k.Number)
		}
		if inBase(k) {
			o.gone[k] = struct{}{}
		}
	}
	for i := range upserts {
		e := &upserts[i]
		k := KeyOf(e)
		if e.IsPrefix() {
			o.prefix[e.Number] = e.Name
			if len(e.Number) < 64 {
				o.lens |= 1 << len(e.Number)
			}
		} else {
			o.exact[e.Number] = e.Name
		}
		if inBase(k) {
			o.gone[k] = struct{}{}
		}
	}
	if len(o.exact)+len(o.prefix)+len(o.gone) > max(4096, len(t.ents)/20) {
		return nil, false
	}
	nt := *t
	nt.over, nt.version, nt.fallback = o, d.Version, d.FallbackName
	return &nt, true
}

// LookupCall names a caller from the two forms CUCM sends the calling
// number in: an exact entry of the number as at the trigger point, then of
// the transformed (usually globalized +E.164) number; then the longest
// prefix of the first, then of the second. An exact entry always wins over
// a prefix, whatever the form. The calling number goes first as
// pgiralt/ucm_name_lookup reads it (main.py, which falls back to
// transformedcgpn only when callingnumber is absent).
func (t *Table) LookupCall(calling, transformed string) (Hit, bool) {
	forms := [2]string{calling, transformed}
	names := [2]string{"calling", "transformed_calling"}
	for i, n := range forms {
		if n == "" || i == 1 && n == calling {
			continue
		}
		if h, ok := t.lookupExact(n); ok {
			h.Form = names[i]
			return h, true
		}
	}
	if t.prefixLens == 0 && (t.over == nil || t.over.lens == 0) {
		return Hit{}, false
	}
	for i, n := range forms {
		if n == "" || i == 1 && n == calling {
			continue
		}
		if h, ok := t.lookupPrefix(n); ok {
			h.Form = names[i]
			return h, true
		}
	}
	return Hit{}, false
}

// Builder collects entries into a Table. Entries are copied into the
// arena as they are added, so the caller may reuse its strings.
type Builder struct {
	id, fallback string
	version      int64
	arena        strings.Builder
	ents         []ent
}

// NewBuilder starts a table for directory d, sized for about n entries.
func NewBuilder(d *Directory, n int) *Builder {
	b := &Builder{id: d.ID, fallback: d.FallbackName, version: d.Version}
	if n > 0 {
		b.arena.Grow(n * 28)
		b.ents = make([]ent, 0, n)
	}
	return b
}

// WithDirectory sets the directory metadata (fallback name, version) the
// table is built with.
func (b *Builder) WithDirectory(d *Directory) *Builder {
	b.id, b.fallback, b.version = d.ID, d.FallbackName, d.Version
	return b
}

// Add adds one entry; number and name must already be clean (Entry.Clean).
func (b *Builder) Add(number, name string, prefix bool) error {
	if len(number) == 0 || len(number) > MaxNumberLen || len(name) > MaxNameLen {
		return fmt.Errorf("entry %q: number or name out of bounds", number)
	}
	if len(b.ents) >= MaxEntries {
		return fmt.Errorf("more than %d entries", MaxEntries)
	}
	off := b.arena.Len()
	b.arena.WriteString(number)
	b.arena.WriteString(name)
	b.ents = append(b.ents, ent{off: uint32(off), nlen: uint8(len(number)), mlen: uint8(len(name)), prefix: prefix})
	if len(b.ents)%4096 == 0 {
		runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
	}
	return nil
}

// Build returns the table. A number added twice with the same kind is an
// error naming it.
func (b *Builder) Build() (*Table, error) {
	t := &Table{id: b.id, fallback: b.fallback, version: b.version, arena: b.arena.String(), ents: b.ents, seed: maphash.MakeSeed()}
	nPrefix := 0
	for i := range b.ents {
		if b.ents[i].prefix {
			nPrefix++
		}
	}
	t.exact = makeSlots(len(b.ents) - nPrefix)
	t.prefix = makeSlots(nPrefix)
	for i := range t.ents {
		if i%4096 == 4095 {
			runtime.Gosched()
		}
		slots := t.exact
		num := t.number(uint32(i))
		if t.ents[i].prefix {
			slots = t.prefix
			if len(num) < 64 {
				t.prefixLens |= 1 << len(num)
			}
		}
		if err := t.insert(slots, num, uint32(i)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// makeSlots sizes a table at most half full.
func makeSlots(n int) []uint32 {
	if n == 0 {
		return nil
	}
	size := 1 << bits.Len(uint(2*n-1))
	return make([]uint32, size)
}

func (t *Table) insert(slots []uint32, number string, i uint32) error {
	mask := uint64(len(slots) - 1)
	h := maphash.String(t.seed, number) & mask
	for {
		k := slots[h]
		if k == 0 {
			slots[h] = i + 1
			return nil
		}
		if t.number(k-1) == number {
			return fmt.Errorf("number %q is in the directory twice", number)
		}
		h = (h + 1) & mask
	}
}
