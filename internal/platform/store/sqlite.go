package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteBackend keeps two pools on one WAL file: a single writer connection
// (SQLite allows one writer anyway; config writes are rare and call-log writes
// batched) and a few readers that never wait for it.
type sqliteBackend struct {
	w *sql.DB
	r *sql.DB
}

// Page caches, in KiB (negative cache_size): SQLite's memory is outside the
// Go heap but inside the server's RSS, and each connection has its own.
// Large caches buy nothing here: the bulk insert appends to the table's
// last page and the index is rebuilt in one sort; reads are scans or
// single-row lookups. A big cache would only stay resident after a bulk
// replacement had filled it.
const (
	writerCache = "cache_size(-4096)"
	readerCache = "cache_size(-2048)"
)

func openSQLite(ctx context.Context, file string) (*sqliteBackend, error) {
	base := "file:" + (&url.URL{Path: file}).EscapedPath() + "?" + url.Values{"_pragma": {
		"busy_timeout(10000)",
		"journal_mode(WAL)",
		"foreign_keys(1)",
		"synchronous(NORMAL)",
		"wal_autocheckpoint(16384)",
	}}.Encode()
	w, err := sql.Open("sqlite", base+"&_pragma="+url.QueryEscape(writerCache)+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite %s: %w", file, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// Open the writer first so WAL mode is set before any reader connects.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", file, err)
	}
	r, err := sql.Open("sqlite", base+"&_pragma="+url.QueryEscape(readerCache)+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite %s: %w", file, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &sqliteBackend{w: w, r: r}, nil
}

func (b *sqliteBackend) name() string { return "sqlite" }

func (b *sqliteBackend) begin(ctx context.Context, readOnly bool) (tx, error) {
	if readOnly {
		t, err := b.r.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return &sqliteTx{t: t}, nil
	}
	// A write transaction holds its connection as a sql.Conn, so that
	// copyRows can reach the driver's statement (Raw) within it.
	c, err := b.w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t, err := c.BeginTx(ctx, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &sqliteTx{t: t, c: c}, nil
}

func (b *sqliteBackend) query(ctx context.Context, q string, args ...any) (rows, error) {
	return b.r.QueryContext(ctx, q, args...)
}

func (b *sqliteBackend) queryRow(ctx context.Context, q string, args ...any) row {
	return b.r.QueryRowContext(ctx, q, args...)
}

func (b *sqliteBackend) ping(ctx context.Context) error {
	// The one writer connection, busy with a long transaction (a million
	// directory entries imported), is alive by being busy: pinging it
	// would wait for the transaction and report the store unreachable.
	if b.w.Stats().InUse == 0 {
		if err := b.w.PingContext(ctx); err != nil {
			return err
		}
	}
	return b.r.PingContext(ctx)
}

func (b *sqliteBackend) close() error {
	return errors.Join(b.r.Close(), b.w.Close())
}

func (b *sqliteBackend) isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code()
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// changes: one SQLite file has one process writing it; that process reloads
// after its own writes, so there is nothing to listen for.
func (b *sqliteBackend) changes(ctx context.Context, done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		close(ch)
	}()
	return ch
}

type sqliteTx struct {
	t *sql.Tx
	c *sql.Conn // a write transaction's connection, returned to the pool when it ends
}

func (t *sqliteTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.t.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *sqliteTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	return t.t.QueryContext(ctx, q, args...)
}

func (t *sqliteTx) queryRow(ctx context.Context, q string, args ...any) row {
	return t.t.QueryRowContext(ctx, q, args...)
}

// copyRows inserts the rows through one prepared single-row INSERT within
// the write transaction.
func (t *sqliteTx) copyRows(ctx context.Context, table string, cols []string, n int, row func(i int) []any) error {
	if n == 0 {
		return nil
	}
	// One prepared single-row INSERT per row, not multi-row statements: a
	// multi-row INSERT inside a transaction makes SQLite keep a statement
	// journal (a temp file, or malloc'd chunks with temp_store=MEMORY), which
	// profiling showed to cost more than the inserts themselves.
	//
	// Each row runs under a context that cannot be cancelled: given a
	// cancellable one, the driver starts a watcher goroutine and installs a
	// progress handler for every statement, which costs more than the
	// insert. Cancellation is checked every 1,024 rows instead (and the
	// transaction itself still watches ctx).
	//
	// The rows go to the driver's statement directly (sql.Conn.Raw), with
	// one argument slice for all of them: through database/sql every Exec
	// allocates its own converted copy of the arguments, and the garbage of
	// a bulk replacement is GC work beside the calls.
	if t.c == nil {
		return errors.New("copyRows outside a write transaction")
	}
	return t.c.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("sqlite driver connection %T cannot prepare", dc)
		}
		ds, err := pc.PrepareContext(ctx, multiInsert(table, cols, 1))
		if err != nil {
			return err
		}
		defer ds.Close()
		st, ok := ds.(driver.StmtExecContext)
		if !ok {
			return fmt.Errorf("sqlite driver statement %T cannot execute", ds)
		}
		args := make([]driver.NamedValue, len(cols))
		for i := range args {
			args[i].Ordinal = i + 1
		}
		rowCtx := context.WithoutCancel(ctx)
		for i := 0; i < n; i++ {
			if i%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if i%16 == 15 {
				runtime.Gosched() // bulk work yields to calls (DESIGN.md, Conventions)
			}
			vals := row(i)
			if len(vals) != len(args) {
				return fmt.Errorf("row %d of %s: %d values for %d columns", i, table, len(vals), len(args))
			}
			for j, v := range vals {
				if args[j].Value, err = driverValue(v); err != nil {
					return fmt.Errorf("row %d of %s, column %s: %w", i, table, cols[j], err)
				}
			}
			if _, err := st.ExecContext(rowCtx, args); err != nil {
				return err
			}
		}
		clear(args) // keeps nothing of the last row
		return nil
	})
}

// driverValue is v as database/sql would hand it to the driver.
func driverValue(v any) (driver.Value, error) {
	switch x := v.(type) {
	case nil, int64, float64, bool, []byte, string, time.Time:
		return x, nil
	case int:
		return int64(x), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(v)
}

// insertIDs reserves n ids past the table's AUTOINCREMENT sequence, then
// inserts the rows with them through copyRows. The write transaction began
// IMMEDIATE, so no other writer can take the same ids; SQLite moves the
// sequence past the explicit ids itself. (An INSERT ... RETURNING per row
// through database/sql cost twice the CPU and allocations: 1.6 s and 3.3 M
// allocations for 100,000 rules against 0.87 s and 1.4 M.)
func (t *sqliteTx) insertIDs(ctx context.Context, table string, cols []string, n int, row func(i int) []any, reserved func(ids []int64)) ([]int64, error) {
	ids := make([]int64, n)
	if n == 0 {
		return ids, nil
	}
	var base int64
	err := t.t.QueryRowContext(ctx, `SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),
		COALESCE((SELECT max(id) FROM `+table+`), 0))`, table).Scan(&base)
	if err != nil {
		return nil, fmt.Errorf("reserve ids in %s: %w", table, err)
	}
	for i := range ids {
		ids[i] = base + 1 + int64(i)
	}
	if reserved != nil {
		reserved(ids)
	}
	withID := append([]string{"id"}, cols...)
	vals := make([]any, 0, len(withID))
	err = t.copyRows(ctx, table, withID, n, func(i int) []any {
		vals = append(append(vals[:0], ids[i]), row(i)...)
		return vals
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// lockMigrations: the write transaction began IMMEDIATE and holds the lock.
func (t *sqliteTx) lockMigrations(context.Context) error { return nil }

func (t *sqliteTx) notifyChange(context.Context) error { return nil }

func (t *sqliteTx) commit(context.Context) error {
	defer t.release()
	return t.t.Commit()
}

func (t *sqliteTx) rollback(context.Context) error {
	defer t.release()
	return t.t.Rollback()
}

func (t *sqliteTx) release() {
	if t.c != nil {
		_ = t.c.Close()
		t.c = nil
	}
}

func multiInsert(table string, cols []string, n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (")
	b.WriteString(strings.Join(cols, ", "))
	b.WriteString(") VALUES ")
	one := "(" + strings.Repeat("?, ", len(cols)-1) + "?)"
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}
