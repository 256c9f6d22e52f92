-- 0001: the initial schema of the postgres store.
--
-- It follows the SQLite store's (internal/store/sqlite/migrations): times
-- are bigint microseconds since the Unix epoch, UTC, NULL for unset, so
-- that every backend keeps the same precision; metadata, tool calls and
-- ext documents are JSON text, kept byte for byte; everything a session
-- owns goes with it (ON DELETE CASCADE). Ids, keys and the columns
-- listings order by use the "C" collation: byte order, as the other
-- stores sort, whatever the database's locale.

-- kerneld_now_us is the database's clock in microseconds. Leases expire
-- by it, so replicas whose clocks disagree still agree on who holds one.
CREATE FUNCTION kerneld_now_us() RETURNS bigint
	LANGUAGE sql VOLATILE
	AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

CREATE TABLE sessions (
	id             text COLLATE "C" NOT NULL PRIMARY KEY,
	tenant         text COLLATE "C" NOT NULL,
	agent          text COLLATE "C" NOT NULL,
	name           text   NOT NULL,
	metadata       text,                      -- JSON object; NULL when empty
	state          text COLLATE "C" NOT NULL,
	parent_id      text COLLATE "C" NOT NULL, -- '' for a top-level session
	root_id        text   NOT NULL,
	depth          integer NOT NULL,
	created_at     bigint NOT NULL,
	updated_at     bigint NOT NULL,
	ttl            bigint NOT NULL,           -- idle time allowed, in nanoseconds; 0: none
	expires_at     bigint,                    -- NULL: never expires
	last_seq       bigint NOT NULL DEFAULT 0, -- moved only by event appends
	active_run_id  text   NOT NULL,
	inherit_memory text   NOT NULL,
	forked_from    text COLLATE "C" NOT NULL,
	version        bigint NOT NULL,
	ext            text                       -- the fields no query selects by; NULL when empty
);

-- Listings page newest first by (created_at, id) within each filter.
CREATE INDEX sessions_by_created ON sessions (created_at, id);
CREATE INDEX sessions_by_tenant ON sessions (tenant, created_at, id);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at, id);
CREATE INDEX sessions_by_state ON sessions (state, created_at, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at, id) WHERE parent_id <> '';
CREATE INDEX sessions_by_fork ON sessions (forked_from, created_at, id) WHERE forked_from <> '';
-- Retention: sessions due to close, and closed sessions due for deletion.
CREATE INDEX sessions_by_expiry ON sessions (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX sessions_by_update ON sessions (state, updated_at);

-- Metadata entries, one row each, with their session's created_at, so a
-- listing by metadata walks one entry's index in listing order.
CREATE TABLE session_metadata (
	session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	key        text COLLATE "C" NOT NULL,
	value      text COLLATE "C" NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (session_id, key)
);
CREATE INDEX session_metadata_by_value ON session_metadata (key, value, created_at, session_id);

-- n numbers runs in the order they were created: a session's runs list
-- newest first by it.
CREATE TABLE runs (
	n               bigint GENERATED ALWAYS AS IDENTITY,
	session_id      text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	id              text COLLATE "C" NOT NULL,
	state           text COLLATE "C" NOT NULL,
	input           text   NOT NULL,
	idempotency_key text   NOT NULL,  -- '' when the run was created without one
	created_at      bigint NOT NULL,
	started_at      bigint,
	ended_at        bigint,
	error_code      text,             -- NULL with error_message: the run has no error
	error_message   text,
	input_tokens    bigint NOT NULL,
	output_tokens   bigint NOT NULL,
	start_seq       bigint NOT NULL,
	end_seq         bigint NOT NULL,
	version         bigint NOT NULL,
	ext             text,
	PRIMARY KEY (session_id, id)
);
CREATE INDEX runs_by_session ON runs (session_id, n);
CREATE INDEX runs_by_session_state ON runs (session_id, state, n);
CREATE INDEX runs_by_idempotency_key ON runs (session_id, idempotency_key, created_at)
	WHERE idempotency_key <> '';
-- Recovery and take-over list runs by state, oldest first.
CREATE INDEX runs_by_state ON runs (state, created_at, id);

CREATE TABLE messages (
	session_id   text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	position     bigint  NOT NULL,
	id           text    NOT NULL,
	run_id       text    NOT NULL,
	role         text    NOT NULL,
	content      text    NOT NULL,
	tool_calls   text,               -- JSON array; NULL when none
	tool_call_id text    NOT NULL,
	is_error     boolean NOT NULL,
	created_at   bigint  NOT NULL,
	compaction   text,               -- JSON object for a compaction entry; else NULL
	images       text,               -- JSON array of image refs; NULL for none
	PRIMARY KEY (session_id, position)
);

CREATE TABLE memory (
	session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	key        text COLLATE "C" NOT NULL,
	value      bytea,
	updated_at bigint NOT NULL,
	PRIMARY KEY (session_id, key)
);

-- The event log: rows are small and always read by (session_id, seq).
CREATE TABLE events (
	session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	seq        bigint NOT NULL,
	run_id     text   NOT NULL,
	type       text   NOT NULL,
	time       bigint NOT NULL,
	data       bytea,
	meta       bytea,
	PRIMARY KEY (session_id, seq)
);

-- Leases: one row per session whose runs a replica holds, until
-- expires_at (kerneld_now_us). Tokens come from one sequence, so each is
-- greater than every token given before, for any session.
CREATE SEQUENCE lease_tokens;
CREATE TABLE leases (
	session_id text COLLATE "C" NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	token      bigint NOT NULL,
	holder     text   NOT NULL,
	expires_at bigint NOT NULL
);
