package commands

import (
	"math"
	"strconv"
)

// Spring Cloud Gateway's RedisRateLimiter token bucket (request_rate_limiter.lua), natively.
// KEYS: the tokens key and the timestamp key; ARGV: replenishRate, burstCapacity, now
// (v4.x–v5.x send "" so the server's TIME seconds are used), requestedTokens.
//
//	filled = min(capacity, last_tokens + max(0, now - last_refreshed) * rate)
//	allowed = filled >= requested; new_tokens = filled - requested when allowed
//	ttl = floor(2 * capacity / rate); when > 0: SETEX both keys (tokens, now)
//	reply {allowed 1|0, new_tokens} as integers
//
// Four texts, three ways to read now, which springClock names.

type springClock int

const (
	springArgOrTime springClock = iota // tonumber(ARGV[3]), else TIME[1]: v4.0–v5.x
	springTime                         // TIME[1]: v3.0.6–v3.1.x
	springArg                          // tonumber(ARGV[3]) (the client's clock): v2.2–v3.0.5
)

func init() {
	const lib = "Spring Cloud Gateway"
	registerScript(lib+" v4.3.0–v5.x", "request_rate_limiter", textSpringTokenBucket, func(c scriptRun) { springTokenBucket(&c, springArgOrTime) })
	registerScript(lib+" v4.0.x–v4.2.x", "request_rate_limiter", textSpringTokenBucket40, func(c scriptRun) { springTokenBucket(&c, springArgOrTime) })
	registerScript(lib+" v3.0.6–v3.1.x", "request_rate_limiter", textSpringTokenBucket306, func(c scriptRun) { springTokenBucket(&c, springTime) })
	registerScript(lib+" v2.2.x–v3.0.5", "request_rate_limiter", textSpringTokenBucket22, func(c scriptRun) { springTokenBucket(&c, springArg) })
}

func springTokenBucket(c *scriptRun, clock springClock) {
	rate, okR := c.num(1)
	capacity, okC := c.num(2)
	requested, okQ := c.num(4)
	if !okR || !okC {
		c.luaError("local fill_time", luaArith)
		return
	}
	// now, and the text SETEX stores for it: TIME[1] is a string, ARGV[3] a number.
	now, hasNow := c.num(3)
	var nowText []byte
	if clock == springTime || (clock == springArgOrTime && !hasNow) {
		secs := c.tx.NowUs() / 1_000_000 // TIME[1]
		now, hasNow, nowText = float64(secs), true, strconv.AppendInt(make([]byte, 0, 20), secs, 10)
	} else {
		nowText = redisArg(now)
	}
	fillTime := capacity / rate
	ttl := math.Floor(fillTime * 2)
	tokensKey, ok := c.keyAt(1, `local last_tokens`)
	if !ok {
		return
	}
	tsKey, ok := c.keyAt(2, `local last_refreshed`)
	if !ok {
		return
	}
	lastTokens := capacity
	if v, found := c.tx.Get(tokensKey); found {
		if n, ok := luaNumber(v); ok {
			lastTokens = n
		}
	}
	lastRefreshed := c.countOrZero(tsKey)
	if !hasNow {
		c.luaError("local delta", luaArith)
		return
	}
	delta := luaMax(0, now-lastRefreshed)
	filled := luaMin(capacity, lastTokens+delta*rate)
	if !okQ {
		c.luaError("local allowed", luaCompare)
		return
	}
	allowed := filled >= requested
	newTokens := filled
	if allowed {
		newTokens = filled - requested
	}
	if ttl > 0 {
		const at = `redis.call("setex", tokens_key`
		if !c.writable(at) {
			return
		}
		ttlArg := redisArg(ttl)
		if e := c.setEx(tokensKey, redisArg(newTokens), ttlArg, false, "setex"); e != "" {
			c.fail(at, e)
			return
		}
		if e := c.setEx(tsKey, nowText, ttlArg, false, "setex"); e != "" {
			c.fail(`redis.call("setex", timestamp_key`, e)
			return
		}
	}
	c.w.Array(2)
	c.w.Int(boolInt(allowed))
	c.w.Int(luaInt(newTokens))
}
