-- A run's start in one script: its record, its session's, its messages and
-- the events that open it.
-- KEYS: session hash, runs, runm, runi, runst, idem, stream, lease,
-- messages list.
-- ARGV: 1 prefix, 2 session id, 3 run id, 4 token, 5 the session's last
-- seq as read, 6 '1' to create the run ('0': update it);
-- the run: 7 record, 8 new version, 9 state, 10 created, 11 key,
-- 12 idempotent since ('' when not checked), 13 the expected version;
-- the session: 14 record, 15 the expected version, 16 the new version,
-- 17.. the session_fields (9 of them);
-- then the number of messages, the messages, the batch id, and the packed
-- event entries as events_append.lua takes them.
-- Answers {'OK', position of the first message, the new last seq} or
-- {'DUP', record}. Everything is checked before the first write.
local P, sid, rid = ARGV[1], ARGV[2], ARGV[3]
local o = redis.call('HMGET', KEYS[1], 'ver', 'last_seq', unpack(session_fields))
if not o[1] then
  return fail('NOSESSION')
end
if lease_token(KEYS[8]) ~= ARGV[4] then
  return fail('FENCED')
end
if o[1] ~= ARGV[15] or o[2] ~= ARGV[5] then
  return fail('STALE')
end
local nr = {ver = ARGV[8], state = ARGV[9], created = ARGV[10], key = ARGV[11]}
local or_ = nil
if ARGV[6] == '1' then
  if redis.call('HEXISTS', KEYS[2], rid) == 1 then
    return fail('EXISTS')
  end
  if nr.key ~= '' and ARGV[12] ~= '' then
    local dup = newest_with_key(KEYS[6], KEYS[3], nr.key, ARGV[12])
    if dup then
      return {'DUP', redis.call('HGET', KEYS[2], dup)}
    end
  end
else
  local meta = redis.call('HGET', KEYS[3], rid)
  if not meta then
    return fail('NORUN')
  end
  or_ = parse_run_meta(meta)
  if or_.ver ~= ARGV[13] then
    return fail('STALE')
  end
  nr.n = or_.n
end
local ns = fields_from(ARGV, 17)
if not unpack_strings(ns.md) then
  return fail('MALFORMED')
end
local nmsgs = tonumber(ARGV[17 + #session_fields])
local batch = 18 + #session_fields + nmsgs -- the batch id; its entries follow
if not nmsgs or #ARGV < batch + 2 or (#ARGV - batch) % 2 ~= 0 then
  return fail('MALFORMED')
end
for i = batch + 1, #ARGV, 2 do
  local n = tonumber(ARGV[i])
  if not n or n < 1 or n % 1 ~= 0 or #ARGV[i + 1] == 0 then
    return fail('MALFORMED')
  end
end
-- The run.
if not or_ then
  local num = redis.call('HINCRBY', KEYS[1], 'runn', 1)
  nr.n = run_n(num)
  redis.call('ZADD', KEYS[4], num, rid)
end
redis.call('HSET', KEYS[2], rid, ARGV[7])
redis.call('HSET', KEYS[3], rid, format_run_meta(nr))
if not or_ or or_.state ~= nr.state or or_.created ~= nr.created or or_.key ~= nr.key then
  index_run(P, sid, rid, KEYS[5], KEYS[6], or_, nr)
end
-- The session.
redis.call('HSET', KEYS[1], 'rec', ARGV[14], 'ver', ARGV[16],
  'tenant', ns.tenant, 'agent', ns.agent, 'state', ns.state, 'parent', ns.parent, 'fork', ns.fork,
  'exp', ns.exp, 'upd', ns.upd, 'ok', ns.ok, 'md', ns.md)
index_session(P, fields_from(o, 3), ns)
-- The messages.
local first = redis.call('LLEN', KEYS[9]) + 1
local m0 = 18 + #session_fields
for j = m0, m0 + nmsgs - 1, 1000 do
  redis.call('RPUSH', KEYS[9], unpack(ARGV, j, math.min(j + 999, m0 + nmsgs - 1)))
end
-- The events; each entry's id is the seq of its last event.
local seq = tonumber(o[2])
for i = batch + 1, #ARGV, 2 do
  seq = seq + tonumber(ARGV[i])
  redis.call('XADD', KEYS[7], string.format('%d-0', seq), 'e', ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'last_seq', seq, 'last_batch', ARGV[batch])
return {'OK', first, seq}
