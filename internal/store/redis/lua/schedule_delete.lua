-- KEYS: the session's schedules, their claims, the due set. ARGV: prefix,
-- session id, and the ids of the schedules to delete, or none for all of
-- them. Returns how many it deleted; each one's tenant count goes down.
local ids = {}
if #ARGV > 2 then
  for i = 3, #ARGV do
    ids[#ids + 1] = ARGV[i]
  end
else
  ids = redis.call('HKEYS', KEYS[1])
end
local deleted = 0
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', KEYS[1], id)
  if rec then
    local tenant = cjson.decode(rec).tenant
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[3], ARGV[2] .. '\t' .. id)
    if redis.call('DECR', ARGV[1] .. 'sched:n:' .. tenant) <= 0 then
      redis.call('DEL', ARGV[1] .. 'sched:n:' .. tenant)
    end
    deleted = deleted + 1
  end
end
return deleted
