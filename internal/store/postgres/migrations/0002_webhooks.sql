-- 0002: the webhook outbox, as the SQLite store keeps it (its 0007).
--
-- One row per delivery: a payload for one receiver, pending until it is
-- delivered or its retries run out (failed). claim and claim_until hold
-- the dispatcher that is attempting it, until when. Deliveries outlive the
-- session they announce (session.closed is sent after a deletion), so
-- there is no foreign key to sessions.
CREATE TABLE webhook_deliveries (
	id              text COLLATE "C" NOT NULL PRIMARY KEY,
	tenant          text COLLATE "C" NOT NULL,
	session_id      text   NOT NULL,
	type            text   NOT NULL,
	url             text   NOT NULL,
	key_id          text   NOT NULL,
	body            bytea  NOT NULL,
	state           text COLLATE "C" NOT NULL,
	attempts        integer NOT NULL DEFAULT 0,
	created_at      bigint NOT NULL,
	scheduled_at    bigint NOT NULL,
	next_at         bigint NOT NULL,
	last_attempt_at bigint,
	last_status     integer NOT NULL DEFAULT 0,
	last_error      text   NOT NULL DEFAULT '',
	claim           text   NOT NULL DEFAULT '',
	claim_until     bigint NOT NULL DEFAULT 0
);

-- What is due: pending rows only, so finished ones cost the claim nothing.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at, id) WHERE state = 'pending';
-- A tenant's listing, newest first, of every state or of one.
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_tenant_state ON webhook_deliveries (tenant, state, created_at DESC, id DESC);
-- What pruning deletes.
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (last_attempt_at) WHERE state <> 'pending';
