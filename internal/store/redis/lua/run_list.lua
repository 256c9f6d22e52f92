-- KEYS: session hash, runi, runs. ARGV: the largest id to list ('+' or
-- '(' followed by an id), limit (0: all). Answers the records, newest
-- first.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local ids
if tonumber(ARGV[2]) > 0 then
  ids = redis.call('ZREVRANGEBYLEX', KEYS[2], ARGV[1], '-', 'LIMIT', 0, ARGV[2])
else
  ids = redis.call('ZREVRANGEBYLEX', KEYS[2], ARGV[1], '-')
end
local out = {}
for i = 1, #ids, 1000 do
  local part = redis.call('HMGET', KEYS[3], unpack(ids, i, math.min(i + 999, #ids)))
  for _, rec in ipairs(part) do
    out[#out + 1] = rec
  end
end
return out
