package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/signalbox/signalbox/internal/callcontrol/callpolicy"
)

// rateBatch is the rows one upsert statement writes.
const rateBatch = 200

// SyncRateCounts writes node's counts and returns, for every key and window
// some other node wrote since since, the sum of the other nodes' counts and
// their latest block. One transaction, three statements for up to 200
// pushed counts.
func (s *sqlStore) SyncRateCounts(ctx context.Context, node string, push []callpolicy.LimitCount, since, now time.Time) ([]callpolicy.LimitCount, error) {
	var out []callpolicy.LimitCount
	err := s.write(ctx, false, func(t tx) error {
		for i := 0; i < len(push); i += rateBatch {
			batch := push[i:min(i+rateBatch, len(push))]
			var b strings.Builder
			b.WriteString(`INSERT INTO rate_counts (policy, kind, number, window_start, window_len, node, count, blocked_until, updated_at, expires_at) VALUES `)
			args := make([]any, 0, len(batch)*10)
			for j := range batch {
				c := &batch[j]
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
				exp := max(c.Window+2*c.WindowLen, c.BlockedUntil) / 1000
				args = append(args, c.Policy, int(c.Kind), c.Number, c.Window, c.WindowLen, node, c.Count, c.BlockedUntil, now.UnixMicro(), exp)
			}
			b.WriteString(` ON CONFLICT (policy, kind, number, window_start, node) DO UPDATE SET
				count = excluded.count, blocked_until = excluded.blocked_until, updated_at = excluded.updated_at, expires_at = excluded.expires_at`)
			if _, err := t.exec(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("write rate counts: %w", err)
			}
		}
		rs, err := t.query(ctx, `SELECT policy, kind, number, window_start, window_len, SUM(count), MAX(blocked_until) FROM rate_counts
			WHERE node <> ? AND expires_at > ? AND (policy, kind, number, window_start) IN
				(SELECT policy, kind, number, window_start FROM rate_counts WHERE node <> ? AND updated_at > ?)
			GROUP BY policy, kind, number, window_start, window_len`,
			node, now.UnixMicro(), node, since.UnixMicro())
		if err != nil {
			return fmt.Errorf("read rate counts: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var c callpolicy.LimitCount
			var kind int
			if err := rs.Scan(&c.Policy, &kind, &c.Number, &c.Window, &c.WindowLen, &c.Count, &c.BlockedUntil); err != nil {
				return err
			}
			c.Kind = uint8(kind)
			out = append(out, c)
		}
		return rs.Err()
	})
	return out, err
}

// PruneRateCounts deletes the counts that expired before before.
func (s *sqlStore) PruneRateCounts(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, false, func(t tx) error {
		var err error
		n, err = t.exec(ctx, `DELETE FROM rate_counts WHERE expires_at < ?`, before.UnixMicro())
		return err
	})
	return n, err
}
