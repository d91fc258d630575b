-- Lists several policies use (block, allow) and number groups rules match
-- (group). policies: JSON array of policy ids, [] for every policy.
-- version: the config version of the list's last change, so a node
-- compiles again only the lists that changed.
CREATE TABLE shared_lists (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL CHECK (kind IN ('allow', 'block', 'group')),
    policies    TEXT NOT NULL DEFAULT '[]',
    action      TEXT,
    entries     INTEGER NOT NULL DEFAULT 0,
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE shared_list_entries (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    list_id    TEXT NOT NULL REFERENCES shared_lists(id) ON DELETE CASCADE,
    calling    TEXT NOT NULL CHECK (calling <> ''),
    called     TEXT NOT NULL DEFAULT '',
    expires_at INTEGER,
    note       TEXT NOT NULL DEFAULT '',
    action     TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX shared_list_entries_list ON shared_list_entries (list_id, id);
