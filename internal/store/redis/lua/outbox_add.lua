-- KEYS: none (the outbox's keys are built from P). ARGV: P, then per
-- delivery: id, tenant, doc, scheduled_at, next_at, order key. A delivery
-- whose id is stored already is left as it is.
local P = ARGV[1]
local added = 0
for i = 2, #ARGV, 6 do
  local id, tenant, doc, sched, nxt, lkey = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local k = P .. 'wh:d:' .. id
  if redis.call('EXISTS', k) == 0 then
    redis.call('HSET', k, 'doc', doc, 'tenant', tenant, 'state', 'pending', 'attempts', 0, 'sched', sched,
      'next', nxt, 'last', '', 'status', 0, 'error', '', 'claim', '', 'lkey', lkey)
    redis.call('ZADD', P .. 'wh:due', nxt, id)
    redis.call('ZADD', P .. 'wh:all:' .. tenant, 0, lkey)
    redis.call('ZADD', P .. 'wh:st:pending:' .. tenant, 0, lkey)
    added = added + 1
  end
end
return added
