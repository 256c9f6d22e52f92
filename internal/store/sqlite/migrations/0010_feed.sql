-- 0010: the tenants' session feeds (internal/feed).
--
-- seq runs 1, 2, 3… per tenant; the oldest entries are dropped as new
-- ones come (AppendFeed's keep), so a feed stays bounded. Entries outlive
-- their sessions: a deleted session's entry says so.
CREATE TABLE feed (
	tenant     TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	session_id TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (tenant, seq)
) STRICT, WITHOUT ROWID;
