-- Console sign-in sessions (OpenID Connect): the cookie's secret is stored
-- only as its SHA-256 hash; a session ends at expires_at or at sign-out.
CREATE TABLE sessions (
    hash       TEXT PRIMARY KEY,
    subject    TEXT NOT NULL,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);
