-- Subscriber traces: named JSON specs (trace.Trace), as feeds.
CREATE TABLE traces (
    name       TEXT PRIMARY KEY,
    spec       JSON NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
