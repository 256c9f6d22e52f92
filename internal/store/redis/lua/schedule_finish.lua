-- KEYS: the session's schedules, their claims, the due set, the tenant's
-- count. ARGV: schedule id, its member of the due set, the claim's token,
-- its new record, its next time (micros), and '1' to delete it instead.
local claim = redis.call('HGET', KEYS[2], ARGV[1])
if not claim or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 or string.match(claim, '^(%d+)') ~= ARGV[3] then
  return fail('STALE')
end
if ARGV[6] == '1' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[2])
  if redis.call('DECR', KEYS[4]) <= 0 then
    redis.call('DEL', KEYS[4])
  end
  return 1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ' 0')
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
return 1
