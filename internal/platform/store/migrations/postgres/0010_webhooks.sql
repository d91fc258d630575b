-- Webhooks: named JSON specs (webhook.Spec), as feeds.
CREATE TABLE webhooks (
    name       TEXT PRIMARY KEY,
    spec       JSON NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
