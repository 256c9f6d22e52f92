-- KEYS: the session's image set. ARGV: prefix, session id. Drops each
-- reference; an image left without one is deleted and stops counting in
-- its tenant's usage.
local held = redis.call('HGETALL', KEYS[1])
for i = 1, #held, 2 do
  local hash, tenant = held[i], held[i + 1]
  local refs = ARGV[1] .. 'imgref:' .. hash .. ':' .. tenant
  redis.call('SREM', refs, ARGV[2])
  if redis.call('SCARD', refs) == 0 then
    local blob = ARGV[1] .. 'img:' .. hash .. ':' .. tenant
    local size = tonumber(redis.call('HGET', blob, 'size') or '0')
    redis.call('DEL', blob)
    local usage = ARGV[1] .. 'imgu:' .. tenant
    redis.call('HINCRBY', usage, 'n', -1)
    if redis.call('HINCRBY', usage, 'b', -size) <= 0 then
      redis.call('DEL', usage)
    end
  end
end
redis.call('DEL', KEYS[1])
return 1
