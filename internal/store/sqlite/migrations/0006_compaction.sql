-- 0006: compaction entries in the history.
--
-- A message of role 'compaction' carries its summary as content and the
-- rest of the entry (first kept position, tokens before and after, the
-- messages it summarises) as a JSON object here; NULL for other messages.
ALTER TABLE messages ADD COLUMN compaction TEXT;
