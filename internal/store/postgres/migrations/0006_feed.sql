-- 0006: the tenants' session feeds (internal/feed), as the SQLite store
-- keeps them (its 0010).
--
-- seq runs 1, 2, 3… per tenant, given out by feed_heads, whose row an
-- append locks until it commits, so a tenant's appends take turns and
-- leave no gap; the oldest entries are dropped as new ones come
-- (AppendFeed's keep), so a feed stays bounded. Entries outlive their
-- sessions: a deleted session's entry says so.
CREATE TABLE feed_heads (
	tenant text COLLATE "C" NOT NULL PRIMARY KEY,
	seq    bigint NOT NULL
);

CREATE TABLE feed (
	tenant     text COLLATE "C" NOT NULL,
	seq        bigint NOT NULL,
	session_id text   NOT NULL,
	kind       text   NOT NULL,
	created_at bigint NOT NULL,
	data       bytea  NOT NULL,
	PRIMARY KEY (tenant, seq)
);
