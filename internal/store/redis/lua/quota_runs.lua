-- quota_runs.lua: record that replica ARGV[1] has ARGV[2] runs of the
-- tenant whose hash KEYS[1] is (field: replica, value "<runs> <expires ms>")
-- and reply {ok (1|0), the tenant's runs in all}. The counts of other
-- replicas that were not written again in time are dropped: their replica
-- stopped. With ARGV[3] > 0 and more runs than that in all, nothing is
-- written and ok is 0.
local replica, runs, limit, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local others = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= replica then
    local n, expires = string.match(fields[i + 1], '^(%d+) (%d+)$')
    if n and tonumber(expires) > now then
      others = others + tonumber(n)
    else
      redis.call('HDEL', KEYS[1], fields[i])
    end
  end
end
if limit > 0 and others + runs > limit then
  return {0, others + runs - 1}
end
if runs > 0 then
  redis.call('HSET', KEYS[1], replica, runs .. ' ' .. (now + ttl))
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('HDEL', KEYS[1], replica)
end
return {1, others + runs}
