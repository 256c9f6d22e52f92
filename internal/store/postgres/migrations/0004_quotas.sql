-- 0004: the tenants' quota counters (internal/quota), shared by every
-- replica, as the Redis store keeps them. Times are the database's
-- (kerneld_now_us), in microseconds, so replicas whose clocks differ
-- agree.

-- A token bucket: tokens left when last counted, at.
CREATE TABLE quota_buckets (
	key    text COLLATE "C" NOT NULL PRIMARY KEY,
	tokens double precision NOT NULL,
	at     bigint NOT NULL
);

-- A counter that starts again once it expires.
CREATE TABLE quota_counters (
	key        text COLLATE "C" NOT NULL PRIMARY KEY,
	value      bigint NOT NULL,
	expires_at bigint NOT NULL
);

-- Each replica's runs of a tenant, standing until expires_at unless
-- written again.
CREATE TABLE quota_runs (
	tenant     text COLLATE "C" NOT NULL,
	replica    text COLLATE "C" NOT NULL,
	runs       integer NOT NULL,
	expires_at bigint NOT NULL,
	PRIMARY KEY (tenant, replica)
);

-- A lock held by token until expires_at.
CREATE TABLE quota_locks (
	key        text COLLATE "C" NOT NULL PRIMARY KEY,
	token      text NOT NULL,
	expires_at bigint NOT NULL
);
