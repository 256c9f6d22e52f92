-- KEYS: the due set. ARGV: prefix, now (micros), the claim's end (micros),
-- holder, limit. Claims the members due at now (their score, the time
-- they are due or their claim ends, is not after now): each gets a new
-- token, and the claim's end as its score, so no one sees it due again
-- before then. Returns record, token, record, token, …
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[5]))
local out = {}
for _, member in ipairs(due) do
  local sid, id = string.match(member, '^(.*)\t(.*)$')
  local tag = ARGV[1] .. '{' .. sid .. '}:'
  local rec = redis.call('HGET', tag .. 'sched', id)
  if not rec then
    redis.call('ZREM', KEYS[1], member) -- its session's schedules were deleted
  else
    local claim = redis.call('HGET', tag .. 'schedc', id)
    local token = 1
    if claim then
      token = tonumber(string.match(claim, '^(%d+)')) + 1
    end
    redis.call('HSET', tag .. 'schedc', id, token .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
    redis.call('ZADD', KEYS[1], ARGV[3], member)
    out[#out + 1] = rec
    out[#out + 1] = tostring(token)
  end
end
return out
