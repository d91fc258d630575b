package store

import (
	"context"
	"strconv"
	"strings"
)

// backend is what differs between SQLite and PostgreSQL. Everything above it
// (sqlStore) is shared SQL written with '?' placeholders; the PostgreSQL
// backend rewrites them to $n.
type backend interface {
	name() string
	// begin starts a transaction. Write transactions on SQLite take the
	// write lock at BEGIN (BEGIN IMMEDIATE), so they never deadlock on upgrade.
	begin(ctx context.Context, readOnly bool) (tx, error)
	query(ctx context.Context, sql string, args ...any) (rows, error)
	queryRow(ctx context.Context, sql string, args ...any) row
	ping(ctx context.Context) error
	close() error
	isUniqueViolation(err error) bool
	changes(ctx context.Context, done <-chan struct{}) <-chan struct{}
}

type tx interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	query(ctx context.Context, sql string, args ...any) (rows, error)
	queryRow(ctx context.Context, sql string, args ...any) row
	// copyRows bulk-inserts n rows; row(i) returns the values of row i in
	// cols order. row may reuse its slice: copyRows consumes each row's
	// values before asking for the next.
	copyRows(ctx context.Context, table string, cols []string, n int, row func(i int) []any) error
	// insertIDs inserts n rows like copyRows with new ids, which it hands
	// to reserved (if not nil) before it writes the rows and returns.
	insertIDs(ctx context.Context, table string, cols []string, n int, row func(i int) []any, reserved func(ids []int64)) ([]int64, error)
	// lockMigrations serialises concurrent Opens of one database.
	lockMigrations(ctx context.Context) error
	// notifyChange tells other nodes that the configuration changed.
	notifyChange(ctx context.Context) error
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

type row interface {
	Scan(dest ...any) error
}

// rebindDollar rewrites '?' placeholders to PostgreSQL's $1, $2, ... The
// shared SQL never contains a literal '?'.
func rebindDollar(q string) string {
	if strings.IndexByte(q, '?') < 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
