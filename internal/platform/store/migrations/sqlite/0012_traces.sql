-- Subscriber traces: named JSON specs (trace.Trace), as feeds.
CREATE TABLE traces (
    name       TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
