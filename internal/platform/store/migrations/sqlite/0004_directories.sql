-- Caller-name directories (CNAM): number or number prefix -> name.
-- version is the config version of the directory's last change, so a node
-- reloads only the directories that changed.
CREATE TABLE directories (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    fallback_name TEXT NOT NULL DEFAULT '',
    entries       INTEGER NOT NULL DEFAULT 0,
    version       INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

-- prefix: 0 exact, 1 prefix. Keyed so that a directory reads in key order
-- (the order incremental replacement merges in) and a number range is a
-- key range.
CREATE TABLE directory_entries (
    directory_id TEXT NOT NULL REFERENCES directories(id) ON DELETE CASCADE,
    prefix       INTEGER NOT NULL CHECK (prefix IN (0, 1)),
    number       TEXT NOT NULL,
    name         TEXT NOT NULL,
    PRIMARY KEY (directory_id, prefix, number)
) WITHOUT ROWID;
