-- KEYS: session hash, stream, lease. ARGV: the packed events (see
-- packEvents), the token, the batch's id. Answers the new last seq. A
-- missing session is reported before the lease.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if lease_token(KEYS[3]) ~= ARGV[2] then
  return fail('FENCED')
end
-- A batch sent again because its reply was lost is not appended twice:
-- the lease holder appends one batch at a time, so a batch already in the
-- log is the last one, and its seqs end at last_seq.
local applied = redis.call('HMGET', KEYS[1], 'last_batch', 'last_seq')
if applied[1] == ARGV[3] then
  return tonumber(applied[2])
end
-- Unpack every event before the first write: each is five strings (run
-- id, type, time, data, meta). A truncated batch fails here, having
-- written nothing.
local fields = unpack_strings(ARGV[1])
if not fields or #fields % 5 ~= 0 then
  return fail('MALFORMED')
end
local seq = tonumber(applied[2])
for i = 1, #fields, 5 do
  seq = seq + 1
  redis.call('XADD', KEYS[2], string.format('%d-0', seq), 'r', fields[i], 't', fields[i + 1], 'ts', fields[i + 2],
    'd', fields[i + 3], 'm', fields[i + 4])
end
redis.call('HSET', KEYS[1], 'last_seq', seq, 'last_batch', ARGV[3] or '')
return seq
