-- 0009: scheduled prompts (internal/schedule).
--
-- A schedule goes with its session (ON DELETE CASCADE). Times are
-- microseconds; every is nanoseconds, 0 for a schedule that fires once.
-- claim is the fencing token of the latest claim and claim_until when it
-- expires, 0 when the schedule is not claimed; due lists what ClaimDue
-- looks at.
CREATE TABLE schedules (
	session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	id          TEXT    NOT NULL,
	tenant      TEXT    NOT NULL,
	at          INTEGER,            -- NULL: first fired every after creation
	every       INTEGER NOT NULL,
	input       TEXT    NOT NULL,
	if_busy     TEXT    NOT NULL,
	next_at     INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	fired       INTEGER NOT NULL,
	last        TEXT,               -- the latest firing as JSON; NULL before the first
	claimed_by  TEXT    NOT NULL DEFAULT '',
	claim_until INTEGER NOT NULL DEFAULT 0,
	claim       INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, id)
) STRICT;

CREATE INDEX schedules_due ON schedules (next_at);
CREATE INDEX schedules_by_tenant ON schedules (tenant);
