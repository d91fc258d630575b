-- Webhooks: named JSON specs (webhook.Spec), as feeds.
CREATE TABLE webhooks (
    name       TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
