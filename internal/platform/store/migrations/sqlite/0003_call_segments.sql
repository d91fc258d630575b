-- The call log moves from one row per call to one row per written batch
-- ("segment"): the batch's records in one compressed blob with its time range,
-- a bitmask of its decisions and a Bloom filter of its numbers (see
-- callseg.go). A row and five index entries per call cost ~34 µs of CPU per
-- call on the embedded SQLite; a segment costs well under 1 µs per call.
-- No release of signalbox shipped the old table; its rows are not carried over.
DROP TABLE IF EXISTS call_log;
CREATE TABLE call_segments (
    id        INTEGER PRIMARY KEY,
    min_time  INTEGER NOT NULL,  -- unix µs of the oldest record
    max_time  INTEGER NOT NULL,  -- unix µs of the newest record
    count     INTEGER NOT NULL,
    decisions INTEGER NOT NULL,  -- bitmask: permit 1, deny 2, divert 4, indeterminate 8, other 16
    filter    BLOB NOT NULL,     -- Bloom filter of the four number fields
    data      BLOB NOT NULL      -- version byte, flags byte, zstd-compressed records
);
CREATE INDEX call_segments_max_time ON call_segments (max_time, id);
