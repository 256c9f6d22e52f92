-- KEYS: session hash, stream, and the lease when fenced. ARGV: the packed
-- events (see packEvents), and the token when fenced. Answers the new last
-- seq.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if KEYS[3] and lease_token(KEYS[3]) ~= ARGV[2] then
  return fail('FENCED')
end
-- Unpack every event before the first write: each is five strings (run
-- id, type, time, data, meta), each after its length in 4 bytes, big
-- endian. A truncated batch fails here, having written nothing.
local buf = ARGV[1]
local evs, pos, size = {}, 1, #buf
while pos <= size do
  local ev = {}
  for j = 1, 5 do
    local a, b, c, d = string.byte(buf, pos, pos + 3)
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    ev[j] = string.sub(buf, pos + 4, pos + 3 + len)
    pos = pos + 4 + len
  end
  evs[#evs + 1] = ev
end
if pos ~= size + 1 then
  return fail('MALFORMED')
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'last_seq'))
for i, ev in ipairs(evs) do
  redis.call('XADD', KEYS[2], (seq + i) .. '-0', 'r', ev[1], 't', ev[2], 'ts', ev[3], 'd', ev[4], 'm', ev[5])
end
seq = seq + #evs
redis.call('HSET', KEYS[1], 'last_seq', seq)
return seq
