-- KEYS: session hash, memory hash. ARGV: key, stored value, max entries
-- (0: no limit).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local max = tonumber(ARGV[3])
if max > 0 and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 and redis.call('HLEN', KEYS[2]) >= max then
  return fail('FULL')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
