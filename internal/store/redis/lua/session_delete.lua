-- KEYS: every key of the session, its hash and run meta first. ARGV:
-- prefix, id.
local o = redis.call('HMGET', KEYS[1], 'ver', unpack(session_fields))
if not o[1] then
  return fail('NOSESSION')
end
local P, id = ARGV[1], ARGV[2]
index_session(P, fields_from(o, 2), {})
local metas = redis.call('HGETALL', KEYS[2])
for i = 1, #metas, 2 do
  local r = parse_run_meta(metas[i + 1])
  redis.call('ZREM', P .. 'runs:' .. r.state, metas[i] .. '\t' .. id)
end
redis.call('DEL', unpack(KEYS))
return 1
