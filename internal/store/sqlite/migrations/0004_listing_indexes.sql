-- 0004: listings that indexes serve in their order, without sorting.
--
-- A listing by metadata walks one entry's index newest first and stops at
-- its page, so session_metadata carries its session's created_at (kept in
-- step by every write of the session's metadata).
ALTER TABLE session_metadata ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
UPDATE session_metadata SET created_at = (SELECT created_at FROM sessions WHERE sessions.id = session_metadata.session_id);
DROP INDEX session_metadata_by_value;
CREATE INDEX session_metadata_by_value ON session_metadata (key, value, created_at, session_id);

-- A session's runs newest first: an index on session_id alone orders each
-- session's entries by rowid, which is creation order.
CREATE INDEX runs_by_session ON runs (session_id);
