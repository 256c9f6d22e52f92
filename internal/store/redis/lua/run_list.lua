-- KEYS: session hash, runi, runs, runst. ARGV: the run to list before (''
-- for none), limit (0: all), then the states to list ('' none: all).
-- Answers the records, newest (last created) first; nothing when the
-- session has no run before.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local limit = tonumber(ARGV[2])
local below = nil -- the creation number runs must be under
if ARGV[1] ~= '' then
  below = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if not below then
    return {}
  end
end
local ids = {}
if #ARGV == 2 then
  local max = '+inf'
  if below then
    max = '(' .. below
  end
  if limit > 0 then
    ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], max, '-inf', 'LIMIT', 0, limit)
  else
    ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], max, '-inf')
  end
else
  -- Each state's runs are one range of runst in creation order: take the
  -- newest of each, then the newest of those.
  local found = {}
  for i = 3, #ARGV do
    local st = ARGV[i]
    local max = '(' .. st .. '\1'
    if below then
      max = '(' .. st .. '\0' .. run_n(tonumber(below))
    end
    local members
    if limit > 0 then
      members = redis.call('ZREVRANGEBYLEX', KEYS[4], max, '[' .. st .. '\0', 'LIMIT', 0, limit)
    else
      members = redis.call('ZREVRANGEBYLEX', KEYS[4], max, '[' .. st .. '\0')
    end
    for _, m in ipairs(members) do
      local rest = string.sub(m, #st + 2)
      found[#found + 1] = {n = string.sub(rest, 1, 15), id = string.sub(rest, 17)}
    end
  end
  table.sort(found, function(a, b) return a.n > b.n end)
  for i = 1, #found do
    if limit > 0 and i > limit then
      break
    end
    ids[i] = found[i].id
  end
end
local out = {}
for i = 1, #ids, 1000 do
  local part = redis.call('HMGET', KEYS[3], unpack(ids, i, math.min(i + 999, #ids)))
  for _, rec in ipairs(part) do
    out[#out + 1] = rec
  end
end
return out
