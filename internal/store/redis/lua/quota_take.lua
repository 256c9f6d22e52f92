-- quota_take.lua: take ARGV[3] units (1 takes, 0 looks, -1 gives one
-- back) from the token bucket KEYS[1], a hash of tokens and the time they
-- were counted, which holds at most ARGV[2] units and refills at ARGV[1]
-- units per second. Time is the server's, so every replica's clock agrees.
-- Replies {allowed (1|0), tokens left as a string}.
local rate, burst, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(stored[1]) or burst
local at = tonumber(stored[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 1
if n > tokens then
  allowed = 0
else
  tokens = math.min(burst, tokens - n)
end
if n ~= 0 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  -- A bucket left alone is full again after burst/rate seconds: it may go.
  redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
end
return {allowed, tostring(tokens)}
