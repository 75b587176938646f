local hitKey = KEYS[1]
local blockKey = KEYS[2]
local throttlerName = ARGV[1]
local ttl = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local blockDuration = tonumber(ARGV[4])
local totalHits = redis.call('INCR', hitKey)
local timeToExpire = redis.call('PTTL', hitKey)
if timeToExpire <= 0 then
redis.call('PEXPIRE', hitKey, ttl)
timeToExpire = ttl
end
local isBlocked = redis.call('GET', blockKey)
local timeToBlockExpire = 0
if isBlocked then
timeToBlockExpire = redis.call('PTTL', blockKey)
elseif totalHits > limit then
redis.call('SET', blockKey, 1, 'PX', blockDuration)
isBlocked = '1'
timeToBlockExpire = blockDuration
end
if isBlocked and timeToBlockExpire <= 0 then
redis.call('DEL', blockKey)
redis.call('SET', hitKey, 1, 'PX', ttl)
totalHits = 1
timeToExpire = ttl
isBlocked = false
end
return { totalHits, timeToExpire, isBlocked and 1 or 0, timeToBlockExpire }