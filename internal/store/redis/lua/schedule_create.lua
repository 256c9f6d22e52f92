-- KEYS: session hash, the session's schedules, the due set, the tenant's
-- count. ARGV: schedule id, its member of the due set, its record, its
-- next time (micros), the bound per session and per tenant (0: none).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return fail('EXISTS')
end
local per_session, per_tenant = tonumber(ARGV[5]), tonumber(ARGV[6])
if per_session > 0 and redis.call('HLEN', KEYS[2]) >= per_session then
  return fail('FULL', 'session')
end
if per_tenant > 0 and tonumber(redis.call('GET', KEYS[4]) or '0') >= per_tenant then
  return fail('FULL', 'tenant')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('INCR', KEYS[4])
return 1
