package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/signalbox/signalbox/internal/callcontrol/directory"
)

// ErrInUse is returned when deleting something that configuration still
// refers to; the error names the referrers.
var ErrInUse = errors.New("in use")

const directoryCols = `id, name, description, fallback_name, entries, version, created_at, updated_at`

func scanDirectory(r row) (directory.Directory, error) {
	var d directory.Directory
	var created, updated int64
	err := r.Scan(&d.ID, &d.Name, &d.Description, &d.FallbackName, &d.Entries, &d.Version, &created, &updated)
	d.CreatedAt, d.UpdatedAt = fromUS(created), fromUS(updated)
	return d, err
}

// DirectoryChange says what a write of directory entries did.
type DirectoryChange struct {
	Added     int `json:"added"`
	Changed   int `json:"changed"`
	Removed   int `json:"removed"`
	Unchanged int `json:"unchanged"`
	// Entries is how many the directory holds after the write.
	Entries int64 `json:"entries"`
	// Version is the directory's version after the write.
	Version int64 `json:"version"`
	// What was written, for a node to apply to its compiled directory
	// without reading it back: the entries added or renamed, the keys
	// removed; Rewritten when the directory was rewritten whole.
	Upserted  []directory.Entry `json:"-"`
	Deleted   []directory.Key   `json:"-"`
	Rewritten bool              `json:"-"`
}

// DirectoryQuery searches a directory's entries; zero fields do not filter.
// Entries come in key order: exact entries by number, then prefixes.
type DirectoryQuery struct {
	Number string // entries whose number starts with this
	Name   string // entries whose name contains this, any case
	// After pages on: entries after this key (the last one seen).
	After *directory.Key
	Limit int // default 100, max 10000
}

func (s *sqlStore) ListDirectories(ctx context.Context) ([]directory.Directory, error) {
	rs, err := s.b.query(ctx, `SELECT `+directoryCols+` FROM directories ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list directories: %w", err)
	}
	defer rs.Close()
	out := []directory.Directory{}
	for rs.Next() {
		d, err := scanDirectory(rs)
		if err != nil {
			return nil, fmt.Errorf("list directories: %w", err)
		}
		out = append(out, d)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list directories: %w", err)
	}
	return out, nil
}

func (s *sqlStore) GetDirectory(ctx context.Context, id string) (directory.Directory, error) {
	d, err := scanDirectory(s.b.queryRow(ctx, `SELECT `+directoryCols+` FROM directories WHERE id = ?`, id))
	if isNoRows(err) {
		return d, fmt.Errorf("directory %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("get directory %q: %w", id, err)
	}
	return d, nil
}

// nextVersion is the config version the write transaction it runs in
// will commit (write bumps it after fn).
const nextVersion = `(SELECT version + 1 FROM config_version WHERE id = 1)`

func (s *sqlStore) CreateDirectory(ctx context.Context, d *directory.Directory) error {
	ts := now()
	err := s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `INSERT INTO directories (`+directoryCols+`) VALUES (?, ?, ?, ?, 0, `+nextVersion+`, ?, ?) RETURNING version`,
			d.ID, d.Name, d.Description, d.FallbackName, ts.UnixMicro(), ts.UnixMicro()).Scan(&d.Version)
	})
	if s.b.isUniqueViolation(err) {
		return fmt.Errorf("directory %q: %w", d.ID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create directory %q: %w", d.ID, err)
	}
	d.Entries, d.CreatedAt, d.UpdatedAt = 0, ts, ts
	return nil
}

func (s *sqlStore) UpdateDirectory(ctx context.Context, d *directory.Directory) error {
	ts := now()
	var created int64
	err := s.write(ctx, true, func(t tx) error {
		return t.queryRow(ctx, `UPDATE directories SET name = ?, description = ?, fallback_name = ?, version = `+nextVersion+`, updated_at = ?
			WHERE id = ? RETURNING created_at, entries, version`,
			d.Name, d.Description, d.FallbackName, ts.UnixMicro(), d.ID).Scan(&created, &d.Entries, &d.Version)
	})
	if isNoRows(err) {
		return fmt.Errorf("directory %q: %w", d.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update directory %q: %w", d.ID, err)
	}
	d.CreatedAt, d.UpdatedAt = fromUS(created), ts
	return nil
}

// DeleteDirectory deletes a directory and its entries, unless a policy or
// rule names it (ErrInUse, naming them).
func (s *sqlStore) DeleteDirectory(ctx context.Context, id string) error {
	err := s.write(ctx, true, func(t tx) error {
		users, err := directoryUsers(ctx, t, id)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("directory %q is read by %s: %w", id, strings.Join(users, ", "), ErrInUse)
		}
		n, err := t.exec(ctx, `DELETE FROM directories WHERE id = ?`, id)
		if err == nil && n == 0 {
			err = fmt.Errorf("directory %q: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInUse) {
		return fmt.Errorf("delete directory %q: %w", id, err)
	}
	return err
}

// directoryUsers names the policies and rules whose actions read the
// directory (at most ten).
func directoryUsers(ctx context.Context, t tx, id string) ([]string, error) {
	like := `%"` + directory.RefPrefix + id + `"%`
	var out []string
	rs, err := t.query(ctx, `SELECT id FROM policies WHERE CAST(default_action AS TEXT) LIKE ? OR CAST(rate_limit AS TEXT) LIKE ? ORDER BY id LIMIT 10`, like, like)
	if err != nil {
		return nil, err
	}
	for rs.Next() {
		var p string
		if err := rs.Scan(&p); err != nil {
			rs.Close()
			return nil, err
		}
		out = append(out, fmt.Sprintf("policy %q", p))
	}
	rs.Close()
	rs, err = t.query(ctx, `SELECT id, policy_id FROM rules WHERE CAST(action AS TEXT) LIKE ? ORDER BY id LIMIT 10`, like)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var r int64
		var p string
		if err := rs.Scan(&r, &p); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("rule %d of policy %q", r, p))
	}
	return out, rs.Err()
}

// ScanDirectoryEntries calls fn for every entry of a directory, in key
// order (exact entries first, then prefixes, each by number), from one
// read snapshot; it returns the directory as of that snapshot. The strings
// fn gets are valid during the call only.
func (s *sqlStore) ScanDirectoryEntries(ctx context.Context, id string, fn func(number, name string, prefix bool) error) (directory.Directory, error) {
	var d directory.Directory
	err := s.read(ctx, func(t tx) error {
		var err error
		d, err = scanDirectory(t.queryRow(ctx, `SELECT `+directoryCols+` FROM directories WHERE id = ?`, id))
		if isNoRows(err) {
			return fmt.Errorf("directory %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		return scanEntries(ctx, t, id, fn)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return d, fmt.Errorf("read directory %q: %w", id, err)
	}
	return d, err
}

func scanEntries(ctx context.Context, t tx, id string, fn func(number, name string, prefix bool) error) error {
	rs, err := t.query(ctx, `SELECT prefix, number, name FROM directory_entries WHERE directory_id = ? ORDER BY prefix, number`, id)
	if err != nil {
		return err
	}
	defer rs.Close()
	var prefix int
	var number, name string
	n := 0
	for rs.Next() {
		if err := rs.Scan(&prefix, &number, &name); err != nil {
			return err
		}
		if err := fn(number, name, prefix != 0); err != nil {
			return err
		}
		if n++; n%4096 == 0 {
			runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
		}
	}
	return rs.Err()
}

func (s *sqlStore) SearchDirectoryEntries(ctx context.Context, id string, q DirectoryQuery) ([]directory.Entry, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultCallQueryLimit
	}
	q.Limit = min(q.Limit, MaxCallQueryLimit)
	out := []directory.Entry{}
	err := s.read(ctx, func(t tx) error {
		if _, err := scanDirectory(t.queryRow(ctx, `SELECT `+directoryCols+` FROM directories WHERE id = ?`, id)); isNoRows(err) {
			return fmt.Errorf("directory %q: %w", id, ErrNotFound)
		} else if err != nil {
			return err
		}
		// A number prefix is a range of the primary key for each kind; the
		// name is matched row by row, so paging with After bounds each
		// page's work.
		hi := q.Number + "\U0010FFFF"
		afterKind, afterNum := -1, ""
		if q.After != nil {
			afterKind, afterNum = bit(q.After.Prefix), q.After.Number
		}
		rs, err := t.query(ctx, `SELECT prefix, number, name FROM directory_entries
			WHERE directory_id = ? AND prefix IN (0, 1) AND number >= ? AND number < ?
			AND (prefix > ? OR prefix = ? AND number > ?)
			AND (? = '' OR lower(name) LIKE ? ESCAPE '\')
			ORDER BY prefix, number LIMIT ?`,
			id, q.Number, hi, afterKind, afterKind, afterNum, q.Name, "%"+likeEscape(strings.ToLower(q.Name))+"%", q.Limit)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var e directory.Entry
			var prefix int
			if err := rs.Scan(&prefix, &e.Number, &e.Name); err != nil {
				return err
			}
			e.Match = directory.Exact
			if prefix != 0 {
				e.Match = directory.Prefix
			}
			out = append(out, e)
		}
		return rs.Err()
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("search directory %q: %w", id, err)
	}
	return out, err
}

// likeEscape makes %, _ and \ literal in a LIKE pattern with ESCAPE '\'.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

var directoryEntryCols = []string{"directory_id", "prefix", "number", "name"}

func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ReplaceDirectoryEntries makes entries the directory's whole content,
// writing only the difference: the entries stored now are read in key
// order and merged with entries sorted the same way, so a daily refresh
// that changes 1 % of a million entries writes 1 % of them. entries are
// clean (directory.Entry.Clean) and unique by key; they are sorted in
// place.
func (s *sqlStore) ReplaceDirectoryEntries(ctx context.Context, id string, entries []directory.Entry) (DirectoryChange, error) {
	slices.SortFunc(entries, func(a, b directory.Entry) int {
		return cmp.Or(cmp.Compare(bit(a.IsPrefix()), bit(b.IsPrefix())), strings.Compare(a.Number, b.Number))
	})
	return s.writeEntries(ctx, id, func(ctx context.Context, t tx, ch *DirectoryChange) error {
		var add, upd []*directory.Entry
		var del []directory.Key
		i := 0
		err := scanEntries(ctx, t, id, func(number, name string, prefix bool) error {
			for i < len(entries) && keyLess(&entries[i], number, prefix) {
				add = append(add, &entries[i])
				i++
			}
			if i < len(entries) && entries[i].Number == number && entries[i].IsPrefix() == prefix {
				if entries[i].Name != name {
					upd = append(upd, &entries[i])
				} else {
					ch.Unchanged++
				}
				i++
				return nil
			}
			del = append(del, directory.Key{Number: strings.Clone(number), Prefix: prefix})
			return nil
		})
		if err != nil {
			return err
		}
		for ; i < len(entries); i++ {
			add = append(add, &entries[i])
		}
		if n := len(add) + len(upd) + len(del); n > rewriteAbove && n > (len(entries)+len(del))/4 {
			// Most of the directory changes: rewriting it all is cheaper
			// than updating and deleting row by row.
			ch.Added, ch.Changed, ch.Removed = len(add), len(upd), len(del)
			ch.Rewritten = true
			return rewriteEntries(ctx, t, id, entries, ch)
		}
		return applyEntryChanges(ctx, t, id, add, upd, del, ch)
	})
}

// rewriteAbove is the number of changes from which a replacement changing a
// quarter of a directory or more rewrites it whole.
const rewriteAbove = 10_000

// rewriteEntries deletes every entry of the directory and inserts entries;
// ch (counted by the merge) stays as it is.
func rewriteEntries(ctx context.Context, t tx, id string, entries []directory.Entry, ch *DirectoryChange) error {
	if _, err := t.exec(ctx, `DELETE FROM directory_entries WHERE directory_id = ?`, id); err != nil {
		return err
	}
	return insertEntries(ctx, t, id, len(entries), func(i int) *directory.Entry { return &entries[i] })
}

// insertEntries bulk-inserts n entries of directory id.
func insertEntries(ctx context.Context, t tx, id string, n int, entry func(i int) *directory.Entry) error {
	vals := make([]any, len(directoryEntryCols))
	return t.copyRows(ctx, "directory_entries", directoryEntryCols, n, func(i int) []any {
		e := entry(i)
		vals[0], vals[1], vals[2], vals[3] = id, bit(e.IsPrefix()), e.Number, e.Name
		return vals
	})
}

// keyLess reports whether e sorts before (number, prefix) in key order.
func keyLess(e *directory.Entry, number string, prefix bool) bool {
	if e.IsPrefix() != prefix {
		return !e.IsPrefix()
	}
	return e.Number < number
}

// PutDirectoryEntries adds entries, or renames those already there.
func (s *sqlStore) PutDirectoryEntries(ctx context.Context, id string, entries []directory.Entry) (DirectoryChange, error) {
	return s.writeEntries(ctx, id, func(ctx context.Context, t tx, ch *DirectoryChange) error {
		var add, upd []*directory.Entry
		for i := range entries {
			e := &entries[i]
			var name string
			err := t.queryRow(ctx, `SELECT name FROM directory_entries WHERE directory_id = ? AND prefix = ? AND number = ?`,
				id, bit(e.IsPrefix()), e.Number).Scan(&name)
			switch {
			case isNoRows(err):
				add = append(add, e)
			case err != nil:
				return err
			case name != e.Name:
				upd = append(upd, e)
			default:
				ch.Unchanged++
			}
		}
		return applyEntryChanges(ctx, t, id, add, upd, nil, ch)
	})
}

// DeleteDirectoryEntries deletes entries by key; a key not there is
// ErrNotFound and deletes nothing.
func (s *sqlStore) DeleteDirectoryEntries(ctx context.Context, id string, keys []directory.Key) (DirectoryChange, error) {
	return s.writeEntries(ctx, id, func(ctx context.Context, t tx, ch *DirectoryChange) error {
		return applyEntryChanges(ctx, t, id, nil, nil, keys, ch)
	})
}

// writeEntries runs fn in a write transaction on an existing directory,
// then sets the directory's entry count and version.
func (s *sqlStore) writeEntries(ctx context.Context, id string, fn func(ctx context.Context, t tx, ch *DirectoryChange) error) (DirectoryChange, error) {
	var ch DirectoryChange
	ts := now()
	err := s.write(ctx, true, func(t tx) error {
		var entries int64
		err := t.queryRow(ctx, `SELECT entries FROM directories WHERE id = ?`, id).Scan(&entries)
		if isNoRows(err) {
			return fmt.Errorf("directory %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := fn(ctx, t, &ch); err != nil {
			return err
		}
		ch.Entries = entries + int64(ch.Added-ch.Removed)
		if ch.Entries > directory.MaxEntries {
			return fmt.Errorf("directory %q would hold %d entries, more than %d", id, ch.Entries, directory.MaxEntries)
		}
		return t.queryRow(ctx, `UPDATE directories SET entries = ?, version = `+nextVersion+`, updated_at = ? WHERE id = ? RETURNING version`,
			ch.Entries, ts.UnixMicro(), id).Scan(&ch.Version)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return DirectoryChange{}, err
		}
		return DirectoryChange{}, fmt.Errorf("write directory %q: %w", id, err)
	}
	return ch, nil
}

func applyEntryChanges(ctx context.Context, t tx, id string, add, upd []*directory.Entry, del []directory.Key, ch *DirectoryChange) error {
	ch.Deleted = del
	ch.Upserted = make([]directory.Entry, 0, len(add)+len(upd))
	for _, e := range add {
		ch.Upserted = append(ch.Upserted, *e)
	}
	for _, e := range upd {
		ch.Upserted = append(ch.Upserted, *e)
	}
	for i, k := range del {
		n, err := t.exec(ctx, `DELETE FROM directory_entries WHERE directory_id = ? AND prefix = ? AND number = ?`, id, bit(k.Prefix), k.Number)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("directory %q has no %s entry %q: %w", id, kindName(k.Prefix), k.Number, ErrNotFound)
		}
		if i%1024 == 1023 {
			runtime.Gosched()
		}
	}
	ch.Removed += len(del)
	for i, e := range upd {
		if _, err := t.exec(ctx, `UPDATE directory_entries SET name = ? WHERE directory_id = ? AND prefix = ? AND number = ?`,
			e.Name, id, bit(e.IsPrefix()), e.Number); err != nil {
			return err
		}
		if i%1024 == 1023 {
			runtime.Gosched()
		}
	}
	ch.Changed += len(upd)
	if err := insertEntries(ctx, t, id, len(add), func(i int) *directory.Entry { return add[i] }); err != nil {
		return err
	}
	ch.Added += len(add)
	return nil
}

func kindName(prefix bool) string {
	if prefix {
		return directory.Prefix
	}
	return directory.Exact
}
