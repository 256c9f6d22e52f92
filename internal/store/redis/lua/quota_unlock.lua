-- KEYS: lock. ARGV: token. Deletes the lock only while the caller holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
