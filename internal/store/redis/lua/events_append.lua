-- KEYS: session hash, stream, lease. ARGV: the token, the batch's id, then
-- for each stream entry its number of events and its packed events (see
-- packBatch). Answers the new last seq. A missing session is reported
-- before the lease.
local applied = redis.call('HMGET', KEYS[1], 'last_batch', 'last_seq')
if not applied[2] then
  return fail('NOSESSION')
end
if lease_token(KEYS[3]) ~= ARGV[1] then
  return fail('FENCED')
end
-- A batch sent again because its reply was lost is not appended twice:
-- the lease holder appends one batch at a time, so a batch already in the
-- log is the last one, and its seqs end at last_seq.
if applied[1] == ARGV[2] then
  return tonumber(applied[2])
end
-- Check every entry before the first write, so a malformed batch writes
-- nothing.
if #ARGV < 4 or #ARGV % 2 ~= 0 then
  return fail('MALFORMED')
end
for i = 3, #ARGV, 2 do
  local n = tonumber(ARGV[i])
  if not n or n < 1 or n % 1 ~= 0 or #ARGV[i + 1] == 0 then
    return fail('MALFORMED')
  end
end
-- Each entry's id is the seq of its last event.
local seq = tonumber(applied[2])
for i = 3, #ARGV, 2 do
  seq = seq + tonumber(ARGV[i])
  redis.call('XADD', KEYS[2], string.format('%d-0', seq), 'e', ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'last_seq', seq, 'last_batch', ARGV[2])
return seq
