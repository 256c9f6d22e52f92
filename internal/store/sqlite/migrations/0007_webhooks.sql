-- 0007: the webhook outbox.
--
-- One row per delivery: a payload for one receiver, pending until it is
-- delivered or its retries run out (failed). claim and claim_until hold
-- the dispatcher that is attempting it, until when. Deliveries outlive the
-- session they announce (session.closed is sent after a deletion), so
-- there is no foreign key to sessions. Times are microseconds since 1970.
CREATE TABLE webhook_deliveries (
	id              TEXT PRIMARY KEY,
	tenant          TEXT NOT NULL,
	session_id      TEXT NOT NULL,
	type            TEXT NOT NULL,
	url             TEXT NOT NULL,
	key_id          TEXT NOT NULL,
	body            BLOB NOT NULL,
	state           TEXT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	scheduled_at    INTEGER NOT NULL,
	next_at         INTEGER NOT NULL,
	last_attempt_at INTEGER,
	last_status     INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT NOT NULL DEFAULT '',
	claim           TEXT NOT NULL DEFAULT '',
	claim_until     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- What is due: pending rows only, so finished ones cost the claim nothing.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at, id) WHERE state = 'pending';
-- A tenant's listing, newest first, of every state or of one.
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_tenant_state ON webhook_deliveries (tenant, state, created_at DESC, id DESC);
