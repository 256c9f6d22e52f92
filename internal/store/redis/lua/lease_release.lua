-- KEYS: lease. ARGV: token.
if lease_token(KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
