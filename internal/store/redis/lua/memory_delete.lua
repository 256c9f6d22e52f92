-- KEYS: session hash, memory hash. ARGV: key.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  return fail('NOKEY')
end
return 1
