-- ARGV: P, id, tenant, now. Makes a finished delivery pending again, due
-- now, and returns its hash; NOTFOUND for another tenant's, PENDING for
-- one still pending.
local P, id, tenant, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local k = P .. 'wh:d:' .. id
local owner, old, lkey = unpack(redis.call('HMGET', k, 'tenant', 'state', 'lkey'))
if owner ~= tenant then
  return fail('NOTFOUND')
end
if old == 'pending' then
  return fail('PENDING')
end
redis.call('HSET', k, 'state', 'pending', 'attempts', 0, 'sched', now, 'next', now, 'claim', '')
redis.call('ZADD', P .. 'wh:due', now, id)
redis.call('ZREM', P .. 'wh:done', id)
redis.call('ZREM', P .. 'wh:st:' .. old .. ':' .. tenant, lkey)
redis.call('ZADD', P .. 'wh:st:pending:' .. tenant, 0, lkey)
local h = redis.call('HGETALL', k)
h[#h + 1] = 'id'
h[#h + 1] = id
return h
