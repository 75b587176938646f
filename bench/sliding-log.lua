-- A sorted-set sliding log as users write it by hand, with the server's clock: drop the
-- entries older than the window, count, log the request (a member unique to its
-- microsecond) when under the limit. bench/dropin.sh runs it on redis-server and on Ratchet,
-- which has no native path for it: its interpreter runs it.
-- KEYS[1]: the log. ARGV: limit, window in ms. Reply: allowed, remaining.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  return {0, 0}
end
redis.call('ZADD', KEYS[1], now, t[1] .. '.' .. t[2])
redis.call('PEXPIRE', KEYS[1], window)
return {1, limit - count - 1}
