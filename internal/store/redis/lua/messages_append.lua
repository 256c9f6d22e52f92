-- KEYS: (session hash, messages list) for each session, then the lease
-- when fenced. ARGV: the token or '' when not fenced, then for each session
-- the number of its messages followed by them. Answers, for each session,
-- the position of its first new message.
local token = ARGV[1]
local nk = #KEYS
if token ~= '' then
  nk = nk - 1
end
for i = 1, nk, 2 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return fail('NOSESSION', tostring((i + 1) / 2))
  end
end
if token ~= '' and lease_token(KEYS[nk + 1]) ~= token then
  return fail('FENCED')
end
local out, a = {}, 2
for i = 1, nk, 2 do
  local n = tonumber(ARGV[a])
  out[#out + 1] = redis.call('LLEN', KEYS[i + 1]) + 1
  for j = a + 1, a + n, 1000 do
    redis.call('RPUSH', KEYS[i + 1], unpack(ARGV, j, math.min(j + 999, a + n)))
  end
  a = a + n + 1
end
return out
