-- KEYS: session hash. ARGV: prefix, id, record, version, then the
-- session_fields.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return fail('EXISTS')
end
local P, id = ARGV[1], ARGV[2]
local n = fields_from(ARGV, 5)
redis.call('HSET', KEYS[1], 'rec', ARGV[3], 'last_seq', 0, 'ver', ARGV[4],
  'tenant', n.tenant, 'agent', n.agent, 'state', n.state, 'parent', n.parent, 'exp', n.exp, 'upd', n.upd)
redis.call('ZADD', P .. 'idx:all', 0, id)
index_session(P, id, {}, n)
return 1
