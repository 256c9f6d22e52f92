-- KEYS: lease. ARGV: token, ttl (milliseconds).
if lease_token(KEYS[1]) ~= ARGV[1] then
  return fail('FENCED')
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
