-- KEYS: session hash, runs, runm, runst, idem. ARGV: prefix, session id,
-- run id, record, new version, state, created, key, then the expected
-- version.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local P, sid, rid = ARGV[1], ARGV[2], ARGV[3]
local meta = redis.call('HGET', KEYS[3], rid)
if not meta then
  return fail('NORUN')
end
local o = parse_run_meta(meta)
if o.ver ~= ARGV[9] then
  return fail('STALE')
end
local n = {ver = ARGV[5], state = ARGV[6], created = ARGV[7], n = o.n, key = ARGV[8]}
redis.call('HSET', KEYS[2], rid, ARGV[4])
redis.call('HSET', KEYS[3], rid, format_run_meta(n))
if o.state ~= n.state or o.created ~= n.created or o.key ~= n.key then
  index_run(P, sid, rid, KEYS[4], KEYS[5], o, n)
end
return 1
