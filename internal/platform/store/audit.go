package store

import (
	"context"
	"fmt"
	"time"
)

// AuditRecord is one change made through the API.
type AuditRecord struct {
	ID       int64     `json:"id"`
	Time     time.Time `json:"time"`
	Actor    string    `json:"actor"` // the token's name
	TokenID  string    `json:"token_id,omitempty"`
	Role     string    `json:"role"`
	Action   string    `json:"action"`   // "create rule", "replace rules", ...
	Resource string    `json:"resource"` // policies | feeds | tokens
	Target   string    `json:"target"`   // the id changed
	Detail   string    `json:"detail,omitempty"`
	Client   string    `json:"client,omitempty"` // remote address
}

// AuditQuery filters the audit log; zero fields do not filter. Newest first.
type AuditQuery struct {
	Actor    string
	Resource string
	Since    time.Time
	Until    time.Time
	Limit    int // default 100, max 10000
}

const auditCols = `id, time, actor, token_id, role, action, resource, target, detail, client`

// AppendAudit adds a record (not a configuration change); it sets ID and,
// if zero, Time.
func (s *sqlStore) AppendAudit(ctx context.Context, a *AuditRecord) error {
	if a.Time.IsZero() {
		a.Time = now()
	}
	err := s.write(ctx, false, func(t tx) error {
		return t.queryRow(ctx, `INSERT INTO audit_log (time, actor, token_id, role, action, resource, target, detail, client)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			a.Time.UnixMicro(), a.Actor, a.TokenID, a.Role, a.Action, a.Resource, a.Target, a.Detail, a.Client).Scan(&a.ID)
	})
	if err != nil {
		return fmt.Errorf("append audit record: %w", err)
	}
	return nil
}

// SearchAudit returns records, newest first.
func (s *sqlStore) SearchAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultCallQueryLimit
	}
	q.Limit = min(q.Limit, MaxCallQueryLimit)
	var since, until int64
	if !q.Since.IsZero() {
		since = q.Since.UnixMicro()
	}
	until = 1<<62 - 1
	if !q.Until.IsZero() {
		until = q.Until.UnixMicro()
	}
	rs, err := s.b.query(ctx, `SELECT `+auditCols+` FROM audit_log
		WHERE time >= ? AND time <= ? AND (? = '' OR actor = ?) AND (? = '' OR resource = ?)
		ORDER BY time DESC, id DESC LIMIT ?`,
		since, until, q.Actor, q.Actor, q.Resource, q.Resource, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("search audit log: %w", err)
	}
	defer rs.Close()
	out := []AuditRecord{}
	for rs.Next() {
		var a AuditRecord
		var ts int64
		if err := rs.Scan(&a.ID, &ts, &a.Actor, &a.TokenID, &a.Role, &a.Action, &a.Resource, &a.Target, &a.Detail, &a.Client); err != nil {
			return nil, fmt.Errorf("search audit log: %w", err)
		}
		a.Time = fromUS(ts)
		out = append(out, a)
	}
	return out, rs.Err()
}

// PruneAudit deletes the records older than before.
func (s *sqlStore) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, false, func(t tx) error {
		var err error
		n, err = t.exec(ctx, `DELETE FROM audit_log WHERE time < ?`, before.UnixMicro())
		return err
	})
	return n, err
}
