-- KEYS: the session hash of the session that gains the images, its image
-- set, the image set of the session it takes them from. ARGV: prefix, the
-- id of the session that gains them.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local from = redis.call('HGETALL', KEYS[3])
for i = 1, #from, 2 do
  local hash, tenant = from[i], from[i + 1]
  redis.call('SADD', ARGV[1] .. 'imgref:' .. hash .. ':' .. tenant, ARGV[2])
  redis.call('HSET', KEYS[2], hash, tenant)
end
return 1
