-- KEYS: session hash, runs, runm, idem. ARGV: key, since (microseconds).
-- Answers the record of the run created last with key at or after since.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local rid = newest_with_key(KEYS[4], KEYS[3], ARGV[1], ARGV[2])
if not rid then
  return fail('NORUN')
end
return redis.call('HGET', KEYS[2], rid)
