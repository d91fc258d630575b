-- Times are unix microseconds (UTC) in both dialects, so the SQL above the
-- dialect layer is shared and orders correctly.
CREATE TABLE policies (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL DEFAULT '',
    default_action TEXT NOT NULL,
    rate_limit     TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

-- AUTOINCREMENT: a deleted rule's id is never reused, since the call log
-- refers to rules by id.
CREATE TABLE rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    policy_id   TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    priority    INTEGER NOT NULL,
    enabled     INTEGER NOT NULL,
    match_json  TEXT NOT NULL,
    action      TEXT NOT NULL,
    schedule    TEXT,
    expires_at  INTEGER,
    description TEXT NOT NULL DEFAULT '',
    tags        TEXT,
    hits        INTEGER NOT NULL DEFAULT 0,
    last_hit_at INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX rules_policy_order ON rules (policy_id, priority, id);

CREATE TABLE list_entries (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    policy_id  TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    list       TEXT NOT NULL CHECK (list IN ('allow', 'block')),
    calling    TEXT NOT NULL CHECK (calling <> ''),
    called     TEXT NOT NULL DEFAULT '',
    expires_at INTEGER,
    note       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
CREATE INDEX list_entries_policy ON list_entries (policy_id, list, id);

CREATE TABLE call_log (
    id                  INTEGER PRIMARY KEY,
    time                INTEGER NOT NULL,
    policy              TEXT NOT NULL,
    calling             TEXT NOT NULL,
    called              TEXT NOT NULL,
    transformed_calling TEXT NOT NULL,
    transformed_called  TEXT NOT NULL,
    trigger_point       TEXT NOT NULL,
    device_name         TEXT NOT NULL,
    decision            TEXT NOT NULL,
    step                TEXT NOT NULL,
    rule_id             INTEGER NOT NULL DEFAULT 0,
    entry_id            INTEGER NOT NULL DEFAULT 0,
    latency_us          INTEGER NOT NULL,
    client              TEXT NOT NULL
);
CREATE INDEX call_log_time ON call_log (time);
CREATE INDEX call_log_calling ON call_log (calling, time);
CREATE INDEX call_log_called ON call_log (called, time);
CREATE INDEX call_log_tcalling ON call_log (transformed_calling, time);
CREATE INDEX call_log_tcalled ON call_log (transformed_called, time);

CREATE TABLE feeds (
    name       TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE config_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO config_version (id, version) VALUES (1, 1);

-- The default policy exists from the first start; a later deletion sticks.
INSERT INTO policies (id, name, description, default_action, rate_limit, created_at, updated_at)
VALUES ('default', 'Default', '', '{"decision":"permit"}', NULL,
        CAST(strftime('%s', 'now') AS INTEGER) * 1000000, CAST(strftime('%s', 'now') AS INTEGER) * 1000000);
