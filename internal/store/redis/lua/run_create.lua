-- KEYS: session hash, runs, runm, runi, runst, idem. ARGV: prefix, session
-- id, run id, record, version, state, created, key, then the constraints:
-- idempotent since ('' when not checked) and max queued (0: no bound).
-- Answers {'OK'}, or {'DUP', record} of the run created earlier with key.
-- A taken id is reported first, then a taken key, then a full queue.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
local P, sid, rid = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', KEYS[2], rid) == 1 then
  return fail('EXISTS')
end
local n = {ver = ARGV[5], state = ARGV[6], created = ARGV[7], key = ARGV[8]}
if n.key ~= '' and ARGV[9] ~= '' then
  local dup = newest_with_key(KEYS[6], KEYS[3], n.key, ARGV[9])
  if dup then
    return {'DUP', redis.call('HGET', KEYS[2], dup)}
  end
end
local max = tonumber(ARGV[10])
if max > 0 and n.state == 'queued' and redis.call('ZLEXCOUNT', KEYS[5], '[queued\0', '(queued\1') >= max then
  return fail('FULL')
end
local num = redis.call('HINCRBY', KEYS[1], 'runn', 1)
n.n = run_n(num)
redis.call('HSET', KEYS[2], rid, ARGV[4])
redis.call('HSET', KEYS[3], rid, format_run_meta(n))
redis.call('ZADD', KEYS[4], num, rid)
index_run(P, sid, rid, KEYS[5], KEYS[6], nil, n)
return {'OK'}
