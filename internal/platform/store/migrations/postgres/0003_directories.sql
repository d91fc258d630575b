-- Caller-name directories (CNAM): number or number prefix -> name.
-- version is the config version of the directory's last change, so a node
-- reloads only the directories that changed.
CREATE TABLE directories (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    fallback_name TEXT NOT NULL DEFAULT '',
    entries       BIGINT NOT NULL DEFAULT 0,
    version       BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

-- prefix: 0 exact, 1 prefix. number sorts bytewise (COLLATE "C"), as in
-- SQLite and Go: incremental replacement merges the stored entries in key
-- order with the new ones sorted the same way.
CREATE TABLE directory_entries (
    directory_id TEXT NOT NULL REFERENCES directories(id) ON DELETE CASCADE,
    prefix       SMALLINT NOT NULL CHECK (prefix IN (0, 1)),
    number       TEXT COLLATE "C" NOT NULL,
    name         TEXT NOT NULL,
    PRIMARY KEY (directory_id, prefix, number)
);
