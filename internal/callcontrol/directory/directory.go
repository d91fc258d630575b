// Package directory is the caller-name directory (CNAM): numbers and number
// prefixes mapped to the names CUCM shows on the called phone. It holds the
// model, the number and name rules, the CSV format, and the compiled,
// immutable lookup table the call path reads. It knows nothing of HTTP,
// CURRI or the store.
package directory

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Directory is a named number-to-name table. Its ID is a slug used in rule
// actions ("calling_name": "directory:corp").
type Directory struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// FallbackName is the name sent when the calling number is in no entry;
	// empty leaves the name CUCM has alone.
	FallbackName string `json:"fallback_name,omitempty"`
	// Entries is how many entries the directory holds (read-only).
	Entries int64 `json:"entries"`
	// Version is the config version of its last change (read-only).
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Match kinds of an Entry.
const (
	Exact  = "exact"
	Prefix = "prefix"
)

// Entry maps one number, or every number that starts with it (Match
// "prefix": a company's DID range), to a name.
type Entry struct {
	Number string `json:"number"`
	Name   string `json:"name"`
	Match  string `json:"match,omitempty"` // exact (default) | prefix
}

// IsPrefix reports whether e is a prefix entry.
func (e *Entry) IsPrefix() bool { return e.Match == Prefix }

// MaxNameLen is the longest name sent to CUCM, in bytes; longer names are
// cut at a character boundary. It is the limit the call policy sets on any
// calling_name (callpolicy), so directory names and names written in rules
// are held to the same length.
const MaxNameLen = 64

// MaxNumberLen is the longest number or prefix, as CURRI numbers are.
const MaxNumberLen = 48

// MaxEntries bounds one directory.
const MaxEntries = 2_000_000

var (
	reID     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	reNumber = regexp.MustCompile(`^[+]?[0-9A-D*#]{1,48}$`)
)

// FieldError is a validation error naming the offending field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks a directory's settable fields.
func Validate(d *Directory) error {
	if !reID.MatchString(d.ID) {
		return fieldErr("id", "%q is not a slug (a-z 0-9 _ -, starting with a letter or digit, 1-64)", d.ID)
	}
	if strings.TrimSpace(d.Name) == "" {
		return fieldErr("name", "required")
	}
	if len(d.Name) > 256 {
		return fieldErr("name", "longer than 256 bytes")
	}
	if len(d.Description) > 1024 {
		return fieldErr("description", "longer than 1024 bytes")
	}
	if d.FallbackName != "" {
		n, _, err := CleanName(d.FallbackName)
		if err != nil {
			return fieldErr("fallback_name", "%s", err)
		}
		if n != d.FallbackName {
			return fieldErr("fallback_name", "longer than %d bytes or padded with spaces", MaxNameLen)
		}
	}
	return nil
}

// NormalizeNumber strips the formatting people write numbers with (spaces,
// '-', '.', '(' and ')'), keeping a leading '+', and checks what is left is
// a number as CUCM sends them: "+1 (972) 555-0100" is "+19725550100".
func NormalizeNumber(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, " -.()\t") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case ' ', '-', '.', '(', ')', '\t':
				return -1
			}
			return r
		}, s)
	}
	if !reNumber.MatchString(s) {
		if s == "" {
			return "", fmt.Errorf("empty")
		}
		return "", fmt.Errorf("%q is not a number ([+]0-9A-D*#, 1-%d after removing spaces - . ( ))", s, MaxNumberLen)
	}
	return s, nil
}

// CleanName trims a name and cuts it to MaxNameLen bytes at a character
// boundary (cut reports that it did). A name with a control character or
// invalid UTF-8 is an error: CUCM would show it garbled.
func CleanName(s string) (name string, cut bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", false, fmt.Errorf("empty")
	}
	if !utf8.ValidString(s) {
		return "", false, fmt.Errorf("not valid UTF-8")
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return "", false, fmt.Errorf("control character %U", c)
		}
	}
	if len(s) > MaxNameLen {
		n := MaxNameLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return strings.TrimSpace(s[:n]), true, nil
	}
	return s, false, nil
}

// Clean normalizes an entry in place: its number, its name (cut reports a
// shortened name) and its match kind ("" is exact).
func (e *Entry) Clean() (cut bool, err error) {
	n, err := NormalizeNumber(e.Number)
	if err != nil {
		return false, fieldErr("number", "%s", err)
	}
	e.Number = n
	name, cut, err := CleanName(e.Name)
	if err != nil {
		return false, fieldErr("name", "%s", err)
	}
	e.Name = name
	switch strings.ToLower(strings.TrimSpace(e.Match)) {
	case "", Exact:
		e.Match = Exact
	case Prefix:
		e.Match = Prefix
	default:
		return false, fieldErr("match", "%q is not exact or prefix", e.Match)
	}
	return cut, nil
}

// Key is how the store and imports tell entries apart: a number is one
// exact entry and one prefix entry at most.
type Key struct {
	Number string
	Prefix bool
}

// KeyOf returns e's key.
func KeyOf(e *Entry) Key { return Key{Number: e.Number, Prefix: e.IsPrefix()} }

// RefPrefix starts the value a rule's calling_name takes to name the caller
// from a directory: "directory:<id>".
const RefPrefix = "directory:"

// RefID returns the directory id of a "directory:<id>" name, or "".
func RefID(name string) string {
	if id, ok := strings.CutPrefix(name, RefPrefix); ok {
		return id
	}
	return ""
}

// ValidateID checks a directory id (a slug).
func ValidateID(id string) error {
	if !reID.MatchString(id) {
		return fmt.Errorf("%q is not a directory id (a-z 0-9 _ -, 1-64)", id)
	}
	return nil
}
