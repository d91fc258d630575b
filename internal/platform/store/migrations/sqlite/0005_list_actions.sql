-- What an allow-list or block-list hit tells CUCM: per policy (NULL: continue
-- for the allow list, reject "blocked" for the block list) and per entry
-- (NULL: the list's). JSON actions, as default_action.
ALTER TABLE policies ADD COLUMN allow_action TEXT;
ALTER TABLE policies ADD COLUMN block_action TEXT;
ALTER TABLE list_entries ADD COLUMN action TEXT;
