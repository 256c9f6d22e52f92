-- KEYS: session hash. ARGV: prefix, record, the expected version, the new
-- version, then the session_fields. last_seq, the session's LastSeq, is
-- left alone: only appends move it.
local o = redis.call('HMGET', KEYS[1], 'ver', unpack(session_fields))
if not o[1] then
  return fail('NOSESSION')
end
if o[1] ~= ARGV[3] then
  return fail('STALE')
end
local n = fields_from(ARGV, 5)
if not unpack_strings(n.md) then
  return fail('MALFORMED')
end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'ver', ARGV[4],
  'tenant', n.tenant, 'agent', n.agent, 'state', n.state, 'parent', n.parent, 'fork', n.fork,
  'exp', n.exp, 'upd', n.upd, 'ok', n.ok, 'md', n.md)
index_session(ARGV[1], fields_from(o, 2), n)
return 1
