-- 0003: what sessions and runs need now that several kernels may share a
-- store (they do not share a SQLite file, but every store keeps one model).
--
-- version: optimistic concurrency; an update applies only to the version it
-- was read at. ext: the fields no query selects by, as one JSON document
-- (NULL when empty), so adding such a field needs no migration.
ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN ext TEXT;
ALTER TABLE runs ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN ext TEXT;

-- Listings page newest first by creation time, then id: ids no longer
-- sort by time once clients choose them. The old (…, id) indexes go.
DROP INDEX sessions_by_tenant;
DROP INDEX sessions_by_agent;
DROP INDEX sessions_by_state;
DROP INDEX sessions_by_parent;
CREATE INDEX sessions_by_created ON sessions (created_at, id);
CREATE INDEX sessions_by_tenant ON sessions (tenant, created_at, id);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at, id);
CREATE INDEX sessions_by_state ON sessions (state, created_at, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at, id) WHERE parent_id <> '';
CREATE INDEX sessions_by_fork ON sessions (forked_from, created_at, id) WHERE forked_from <> '';

-- Metadata entries, one row each, so a listing can select sessions by
-- key and value through an index rather than by reading every session.
CREATE TABLE session_metadata (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	PRIMARY KEY (session_id, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX session_metadata_by_value ON session_metadata (key, value, session_id);
INSERT INTO session_metadata (session_id, key, value)
	SELECT sessions.id, entry.key, entry.value FROM sessions, json_each(sessions.metadata) AS entry
	WHERE sessions.metadata IS NOT NULL;

-- A session's runs by state: its queue, and whether it is busy. Runs of
-- one session list in the order they were created: by rowid.
CREATE INDEX runs_by_session_state ON runs (session_id, state);
