-- Rate-limit counts of the nodes of a cluster, per key and window: each node
-- writes its own count (node), reads the sum of the others'. Ephemeral, hence
-- UNLOGGED (a crash of PostgreSQL empties it: the limits count afresh); rows
-- expire two windows after theirs began (or when their block ends).
CREATE UNLOGGED TABLE rate_counts (
    policy        TEXT NOT NULL,
    kind          SMALLINT NOT NULL,
    number        TEXT NOT NULL,
    window_start  BIGINT NOT NULL,  -- unix ns, a multiple of window_len
    window_len    BIGINT NOT NULL,  -- ns
    node          TEXT NOT NULL,
    count         BIGINT NOT NULL,
    blocked_until BIGINT NOT NULL,  -- unix ns; 0 if not blocked
    updated_at    BIGINT NOT NULL,  -- unix µs, the writing node's clock
    expires_at    BIGINT NOT NULL,  -- unix µs
    PRIMARY KEY (policy, kind, number, window_start, node)
);
CREATE INDEX rate_counts_updated ON rate_counts (updated_at);
CREATE INDEX rate_counts_expires ON rate_counts (expires_at);
