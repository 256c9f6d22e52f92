-- ARGV: P, id, claim, state, attempts, next, last attempt, status, error.
-- Returns 0, writing nothing, unless claim still holds the delivery.
local P, id, claim, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local k = P .. 'wh:d:' .. id
if claim == '' or redis.call('HGET', k, 'claim') ~= claim then
  return 0
end
local tenant, old, lkey = unpack(redis.call('HMGET', k, 'tenant', 'state', 'lkey'))
redis.call('HSET', k, 'state', state, 'attempts', ARGV[5], 'next', ARGV[6], 'last', ARGV[7], 'status', ARGV[8],
  'error', ARGV[9], 'claim', '')
if state == 'pending' then
  redis.call('ZADD', P .. 'wh:due', ARGV[6], id)
else
  redis.call('ZREM', P .. 'wh:due', id)
  redis.call('ZADD', P .. 'wh:done', ARGV[7], id)
end
if old ~= state then
  redis.call('ZREM', P .. 'wh:st:' .. old .. ':' .. tenant, lkey)
  redis.call('ZADD', P .. 'wh:st:' .. state .. ':' .. tenant, 0, lkey)
end
return 1
