-- KEYS: session hash. ARGV: prefix, id, record, new version, then the
-- session_fields, then the expected version ('' when not checked). last_seq,
-- the session's LastSeq, is left alone: only appends move it.
local o = redis.call('HMGET', KEYS[1], 'ver', unpack(session_fields))
if not o[1] then
  return fail('NOSESSION')
end
local expect = ARGV[5 + #session_fields]
if expect ~= '' and o[1] ~= expect then
  return fail('STALE')
end
local P, id = ARGV[1], ARGV[2]
local n = fields_from(ARGV, 5)
redis.call('HSET', KEYS[1], 'rec', ARGV[3], 'ver', ARGV[4],
  'tenant', n.tenant, 'agent', n.agent, 'state', n.state, 'parent', n.parent, 'exp', n.exp, 'upd', n.upd)
index_session(P, id, fields_from(o, 2), n)
return 1
