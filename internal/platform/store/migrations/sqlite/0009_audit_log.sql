-- Every change made through the API: who (token name and role), what and
-- when. Append-only; pruned by age.
CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    time     INTEGER NOT NULL,  -- unix µs
    actor    TEXT NOT NULL,     -- token name ("admin-token" for -admin-token)
    token_id TEXT NOT NULL DEFAULT '',
    role     TEXT NOT NULL,
    action   TEXT NOT NULL,     -- "create rule", "replace rules", ...
    resource TEXT NOT NULL,     -- policies | feeds | tokens
    target   TEXT NOT NULL,     -- the id changed
    detail   TEXT NOT NULL DEFAULT '',
    client   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_time ON audit_log (time);
