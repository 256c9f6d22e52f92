-- 0003: scheduled prompts (internal/schedule), as the SQLite store keeps
-- them (its 0009).
--
-- A schedule goes with its session (ON DELETE CASCADE). Times are
-- microseconds; every is nanoseconds, 0 for a schedule that fires once.
-- claim is the fencing token of the latest claim and claim_until when it
-- expires, 0 when the schedule is not claimed; schedules_due is what
-- ClaimDue reads.
CREATE TABLE schedules (
	session_id  text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	id          text COLLATE "C" NOT NULL,
	tenant      text COLLATE "C" NOT NULL,
	at          bigint,             -- NULL: first fired every after creation
	every       bigint NOT NULL,
	input       text   NOT NULL,
	if_busy     text   NOT NULL,
	next_at     bigint NOT NULL,
	created_at  bigint NOT NULL,
	fired       bigint NOT NULL,
	last        text,               -- the latest firing as JSON; NULL before the first
	claimed_by  text   NOT NULL DEFAULT '',
	claim_until bigint NOT NULL DEFAULT 0,
	claim       bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, id)
);

CREATE INDEX schedules_due ON schedules (next_at, id);
CREATE INDEX schedules_by_tenant ON schedules (tenant);
