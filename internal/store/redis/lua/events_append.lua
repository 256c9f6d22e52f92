-- KEYS: session hash, stream, lease. ARGV: the packed events (see
-- packEvents), the token. Answers the new last seq. A missing session is
-- reported before the lease.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if lease_token(KEYS[3]) ~= ARGV[2] then
  return fail('FENCED')
end
-- Unpack every event before the first write: each is five strings (run
-- id, type, time, data, meta). A truncated batch fails here, having
-- written nothing.
local fields = unpack_strings(ARGV[1])
if not fields or #fields % 5 ~= 0 then
  return fail('MALFORMED')
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'last_seq'))
for i = 1, #fields, 5 do
  seq = seq + 1
  redis.call('XADD', KEYS[2], string.format('%d-0', seq), 'r', fields[i], 't', fields[i + 1], 'ts', fields[i + 2],
    'd', fields[i + 3], 'm', fields[i + 4])
end
redis.call('HSET', KEYS[1], 'last_seq', seq)
return seq
