-- ARGV: P, claim, now, claim until, limit (times in microseconds). A
-- pending delivery is in P wh:due scored by when it is next due: its
-- NextAt, or its claim's expiry while a claim holds it. Claiming moves the
-- score to the expiry, so an expired claim makes it due again by itself.
-- Returns each claimed delivery's hash as a flat array.
local P, claim, now, till, limit = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local ids = redis.call('ZRANGEBYSCORE', P .. 'wh:due', '-inf', now, 'LIMIT', 0, limit)
local out = {}
for _, id in ipairs(ids) do
  local k = P .. 'wh:d:' .. id
  redis.call('HSET', k, 'claim', claim)
  redis.call('ZADD', P .. 'wh:due', till, id)
  local h = redis.call('HGETALL', k)
  h[#h + 1] = 'id'
  h[#h + 1] = id
  out[#out + 1] = h
end
return out
