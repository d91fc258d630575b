-- The hash of the JSON a rule was last sent in by a bulk replacement, so a
-- replacement that sends the same bytes keeps the rule (NULL: none).
ALTER TABLE rules ADD COLUMN src_hash BIGINT;
