-- KEYS: session hash, lease. ARGV: holder, ttl (milliseconds). Answers the
-- new fencing token.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local cur = redis.call('GET', KEYS[2])
if cur then
  return fail('HELD', string.match(cur, '^%d+ (.*)$') or '')
end
-- A token is Redis' clock in microseconds, or one more than the session's
-- last token if that is larger: so tokens grow even across a session
-- deleted and created again under the same id, whose last token went with
-- it. (No script runs in under a microsecond, so tokens never outrun the
-- clock; doubles hold such integers exactly until the year 2255.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local prev = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local token = string.format('%d', math.max(prev + 1, now))
redis.call('HSET', KEYS[1], 'fence', token)
redis.call('SET', KEYS[2], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return tonumber(token)
