-- 0001: the initial kerneld schema.
--
-- Times are INTEGER microseconds since the Unix epoch, UTC; NULL means
-- unset. Metadata and tool calls are JSON text. Every table that belongs
-- to a session references it ON DELETE CASCADE, so deleting a session
-- deletes everything it owns in the same statement. Parents do not own
-- their children: parent_id is a plain column.

-- application_id marks the file as kerneld's ("krnd"), so Open can tell a
-- kerneld database from another program's SQLite file.
PRAGMA application_id = 1802661476;

CREATE TABLE sessions (
	id            TEXT    NOT NULL PRIMARY KEY,
	tenant        TEXT    NOT NULL,
	agent         TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	metadata      TEXT,                       -- JSON object; NULL when empty
	state         TEXT    NOT NULL,
	parent_id     TEXT    NOT NULL,           -- '' for a top-level session
	root_id       TEXT    NOT NULL,
	depth         INTEGER NOT NULL,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	ttl           INTEGER NOT NULL,           -- idle time allowed, in nanoseconds; 0: none
	expires_at    INTEGER,                    -- NULL: never expires
	last_seq      INTEGER NOT NULL DEFAULT 0, -- moved only by event appends
	active_run_id TEXT    NOT NULL
) STRICT, WITHOUT ROWID;

-- ListSessions pages newest (largest id) first within each filter. The
-- partial indexes leave out the rows their filter never selects; queries
-- repeat the index's condition so the planner can use them.
CREATE INDEX sessions_by_tenant ON sessions (tenant, id);
CREATE INDEX sessions_by_agent  ON sessions (agent, id);
CREATE INDEX sessions_by_state  ON sessions (state, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, id) WHERE parent_id <> '';
-- Retention: sessions due to close (ExpiresBefore), and closed sessions
-- due for deletion (State closed and UpdatedBefore, the way retention asks;
-- UpdatedBefore without a state is not indexed).
CREATE INDEX sessions_by_expiry ON sessions (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX sessions_by_update ON sessions (state, updated_at);

-- Runs, messages and memory keep rowid tables: their rows carry user and
-- model text of any size, which WITHOUT ROWID b-trees handle poorly.
CREATE TABLE runs (
	session_id      TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	id              TEXT    NOT NULL,
	state           TEXT    NOT NULL,
	input           TEXT    NOT NULL,
	idempotency_key TEXT    NOT NULL,  -- '' when the run was created without one
	created_at      INTEGER NOT NULL,
	started_at      INTEGER,
	ended_at        INTEGER,
	error_code      TEXT,              -- NULL with error_message: the run has no error
	error_message   TEXT,
	input_tokens    INTEGER NOT NULL,
	output_tokens   INTEGER NOT NULL,
	start_seq       INTEGER NOT NULL,
	end_seq         INTEGER NOT NULL,
	PRIMARY KEY (session_id, id)
) STRICT;

CREATE INDEX runs_by_idempotency_key ON runs (session_id, idempotency_key, created_at)
	WHERE idempotency_key <> '';
-- Startup recovery lists runs by state, oldest first.
CREATE INDEX runs_by_state ON runs (state, created_at, id);

CREATE TABLE messages (
	session_id   TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	position     INTEGER NOT NULL,
	id           TEXT    NOT NULL,
	run_id       TEXT    NOT NULL,
	role         TEXT    NOT NULL,
	content      TEXT    NOT NULL,
	tool_calls   TEXT,              -- JSON array; NULL when none
	tool_call_id TEXT    NOT NULL,
	is_error     INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (session_id, position)
) STRICT;

CREATE TABLE memory (
	session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	key        TEXT    NOT NULL,
	value      BLOB,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, key)
) STRICT;

-- The event log. Rows are small and always read by (session_id, seq), so
-- the primary key is the table.
CREATE TABLE events (
	session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL,
	run_id     TEXT    NOT NULL,
	type       TEXT    NOT NULL,
	time       INTEGER NOT NULL,
	data       BLOB,
	meta       BLOB,
	PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;
