-- KEYS: session hash, lease. ARGV: token, ttl (milliseconds). A missing
-- session is reported before the lease.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return fail('NOSESSION')
end
if lease_token(KEYS[2]) ~= ARGV[1] then
  return fail('FENCED')
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
