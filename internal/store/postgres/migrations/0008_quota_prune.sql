-- 0008: when a token bucket is full again, so that rows of quota keys no
-- longer used can be dropped (Store.PruneQuotas): a full bucket is what a
-- missing one reads as. A bucket written before this migration is kept a
-- day from its last take, as if it refilled that slowly.
ALTER TABLE quota_buckets ADD COLUMN full_at bigint;
UPDATE quota_buckets SET full_at = at + 86400000000;
ALTER TABLE quota_buckets ALTER COLUMN full_at SET NOT NULL;
