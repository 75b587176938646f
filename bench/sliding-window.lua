-- The sliding-window rate limit of SPEC section 2, as an application runs it on Redis
-- today: the peer that bench/compare.sh measures RL.LIMIT against.
-- KEYS[1]: the tuple's base key. ARGV: limit, window in ms, cost.
-- Reply: allowed, limit, remaining, retry_after_ms, reset_after_ms (as RL.LIMIT).
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seq = math.floor(now / window)
local elapsed = now - seq * window
local cur_key = KEYS[1] .. ':' .. string.format('%d', seq)
local prev_key = KEYS[1] .. ':' .. string.format('%d', seq - 1)
local counts = redis.call('MGET', cur_key, prev_key)
local cur = tonumber(counts[1]) or 0
local prev = tonumber(counts[2]) or 0
local used = cur + prev * (window - elapsed) / window
if cost <= limit and used + cost <= limit then
  if cost > 0 then
    redis.call('INCRBY', cur_key, cost)
    redis.call('PEXPIRE', cur_key, 2 * window)
  end
  return {1, limit, math.floor(limit - used - cost), 0, 2 * window - elapsed}
end
if cost > limit then
  return {0, limit, math.max(0, math.floor(limit - used)), -1, 2 * window - elapsed}
end
-- Denied: wait for the previous cell to decay enough, or for the window to roll over.
local retry = window - elapsed
if prev > 0 and cur + cost <= limit then
  retry = math.ceil(window - elapsed - (limit - cost - cur) * window / prev)
  if retry < 1 then retry = 1 end
end
local reset = window - elapsed
if cur > 0 then reset = 2 * window - elapsed end
return {0, limit, math.max(0, math.floor(limit - used)), retry, reset}
