-- KEYS: session hash. ARGV: prefix, record, version, then the
-- session_fields.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return fail('EXISTS')
end
local n = fields_from(ARGV, 4)
if not unpack_strings(n.md) then
  return fail('MALFORMED')
end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'last_seq', 0, 'ver', ARGV[3], 'runn', 0,
  'tenant', n.tenant, 'agent', n.agent, 'state', n.state, 'parent', n.parent, 'fork', n.fork,
  'exp', n.exp, 'upd', n.upd, 'ok', n.ok, 'md', n.md)
index_session(ARGV[1], {}, n)
return 1
