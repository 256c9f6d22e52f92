-- KEYS: the tenant's feed (a stream), its last seq. ARGV: how many
-- entries to keep (0: all), session id, kind, time (micros), summary.
-- Appends the entry under the next seq, as stream id <seq>-0, trimming
-- the oldest beyond keep, and returns the seq.
local seq = redis.call('INCR', KEYS[2])
local id = seq .. '-0'
if tonumber(ARGV[1]) > 0 then
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], id, 's', ARGV[2], 'k', ARGV[3], 't', ARGV[4], 'd', ARGV[5])
else
  redis.call('XADD', KEYS[1], id, 's', ARGV[2], 'k', ARGV[3], 't', ARGV[4], 'd', ARGV[5])
end
return seq
