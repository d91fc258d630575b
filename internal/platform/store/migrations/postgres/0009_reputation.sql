-- A policy's reputation service settings (callpolicy.Reputation as JSON; NULL: none).
ALTER TABLE policies ADD COLUMN reputation JSONB;
