-- ARGV: P, before (microseconds), limit. Deletes up to limit finished
-- deliveries last attempted before before; returns how many.
local P, before, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', P .. 'wh:done', '-inf', '(' .. before, 'LIMIT', 0, limit)
for _, id in ipairs(ids) do
  local k = P .. 'wh:d:' .. id
  local tenant, state, lkey = unpack(redis.call('HMGET', k, 'tenant', 'state', 'lkey'))
  if tenant then
    redis.call('ZREM', P .. 'wh:all:' .. tenant, lkey)
    redis.call('ZREM', P .. 'wh:st:' .. state .. ':' .. tenant, lkey)
  end
  redis.call('DEL', k)
  redis.call('ZREM', P .. 'wh:done', id)
end
return #ids
