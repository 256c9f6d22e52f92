-- KEYS: session hash, messages list, lease. ARGV: the token, then the
-- messages. Answers the position of the first. A missing session is
-- reported before the lease.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if lease_token(KEYS[3]) ~= ARGV[1] then
  return fail('FENCED')
end
local first = redis.call('LLEN', KEYS[2]) + 1
for j = 2, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, j, math.min(j + 999, #ARGV)))
end
return first
