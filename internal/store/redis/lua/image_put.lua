-- KEYS: session hash, the session's image set, the image's hash, its set
-- of referring sessions, the tenant's usage hash. ARGV: session id,
-- tenant, image hash, media type, size, created (micros), data, the
-- tenant's bound in bytes (0: none).
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then
  return fail('NOSESSION')
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  local size, max = tonumber(ARGV[5]), tonumber(ARGV[8])
  local used = tonumber(redis.call('HGET', KEYS[5], 'b') or '0')
  if max > 0 and used + size > max then
    return fail('FULL')
  end
  redis.call('HSET', KEYS[3], 'mt', ARGV[4], 'size', ARGV[5], 'created', ARGV[6], 'data', ARGV[7])
  redis.call('HINCRBY', KEYS[5], 'n', 1)
  redis.call('HINCRBY', KEYS[5], 'b', size)
end
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[2])
return 1
