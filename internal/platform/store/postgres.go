package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifyChannel is the LISTEN/NOTIFY channel of configuration changes. Its
// payload is the schema written, because notifications are database-wide and
// several signalbox schemas may share a database.
const notifyChannel = "signalbox_config"

type pgBackend struct {
	pool   *pgxpool.Pool
	schema string // current_schema() of the pool's search_path
	log    *slog.Logger
}

func openPostgres(ctx context.Context, dsn string, log *slog.Logger) (*pgBackend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	if schema == nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s: no schema of search_path %q exists", cfg.ConnConfig.Host, cfg.ConnConfig.RuntimeParams["search_path"])
	}
	return &pgBackend{pool: pool, schema: *schema, log: log}, nil
}

func (b *pgBackend) name() string { return "postgres" }

func (b *pgBackend) begin(ctx context.Context, readOnly bool) (tx, error) {
	opts := pgx.TxOptions{}
	if readOnly {
		// One snapshot for multi-query reads such as LoadPolicies.
		opts = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	}
	t, err := b.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &pgTx{t: t, schema: b.schema}, nil
}

func (b *pgBackend) query(ctx context.Context, q string, args ...any) (rows, error) {
	r, err := b.pool.Query(ctx, rebindDollar(q), args...)
	if err != nil {
		return nil, err
	}
	return pgRows{r}, nil
}

func (b *pgBackend) queryRow(ctx context.Context, q string, args ...any) row {
	return b.pool.QueryRow(ctx, rebindDollar(q), args...)
}

func (b *pgBackend) ping(ctx context.Context) error { return b.pool.Ping(ctx) }

func (b *pgBackend) close() error {
	b.pool.Close()
	return nil
}

func (b *pgBackend) isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// changes LISTENs on a dedicated connection (a pooled one would be handed to
// other queries) and reconnects after losing it. A reconnect also signals,
// since notifications sent while disconnected are lost.
func (b *pgBackend) changes(ctx context.Context, done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			cancel()
		}
	}()
	signal := func() {
		select {
		case ch <- struct{}{}:
		default: // one pending signal already says "reload"
		}
	}
	ready := make(chan struct{})
	go func() {
		defer close(ch)
		defer cancel()
		first := true
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := b.listen(ctx, func() {
				if first {
					first = false
					close(ready)
				} else {
					signal()
				}
				backoff = 100 * time.Millisecond
			}, signal)
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("config change listener lost", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}()
	// Return once LISTEN is in place (or shortly after), so a caller that
	// writes next is sure to hear of it.
	select {
	case <-ready:
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	return ch
}

func (b *pgBackend) listen(ctx context.Context, listening, signal func()) error {
	cfg := b.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == b.schema {
			signal()
		}
	}
}

type pgTx struct {
	t      pgx.Tx
	schema string
}

func (t *pgTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.t.Exec(ctx, rebindDollar(q), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t *pgTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	r, err := t.t.Query(ctx, rebindDollar(q), args...)
	if err != nil {
		return nil, err
	}
	return pgRows{r}, nil
}

func (t *pgTx) queryRow(ctx context.Context, q string, args ...any) row {
	return t.t.QueryRow(ctx, rebindDollar(q), args...)
}

func (t *pgTx) copyRows(ctx context.Context, table string, cols []string, n int, row func(i int) []any) error {
	if n == 0 {
		return nil
	}
	_, err := t.t.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		return row(i), nil
	}))
	return err
}

// insertIDs draws the ids from the table's identity sequence first, then
// COPYs the rows with them: one round trip for the ids, one for the rows.
func (t *pgTx) insertIDs(ctx context.Context, table string, cols []string, n int, row func(i int) []any, reserved func(ids []int64)) ([]int64, error) {
	ids := make([]int64, 0, n)
	if n == 0 {
		return ids, nil
	}
	rs, err := t.t.Query(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)`, table, n)
	if err != nil {
		return nil, err
	}
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("reserve ids in %s: got %d of %d", table, len(ids), n)
	}
	if reserved != nil {
		reserved(ids)
	}
	withID := append([]string{"id"}, cols...)
	err = t.copyRows(ctx, table, withID, n, func(i int) []any {
		return append([]any{ids[i]}, row(i)...)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func (t *pgTx) lockMigrations(ctx context.Context) error {
	_, err := t.t.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('signalbox_migrate:' || $1))`, t.schema)
	return err
}

// notifyChange: NOTIFY is delivered only if the transaction commits.
func (t *pgTx) notifyChange(ctx context.Context) error {
	_, err := t.t.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, t.schema)
	return err
}

func (t *pgTx) commit(ctx context.Context) error   { return t.t.Commit(ctx) }
func (t *pgTx) rollback(ctx context.Context) error { return t.t.Rollback(ctx) }

type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
