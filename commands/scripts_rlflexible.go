package commands

// rate-limiter-flexible's RateLimiterRedis script (one text from v2.0.0 to v11.1.0),
// natively: a counter that starts at the first hit with the window's TTL.
//
//	SET key 0 EX secDuration NX; consumed = INCRBY key points; ttl = PTTL key;
//	if ttl == -1: EXPIRE key secDuration, ttl = 1000*secDuration
//	reply {consumed, ttl} (integers)
//
// The library decides (consumed > points) and reads the same key with MULTI GET PTTL EXEC
// and DEL, which the counter commands serve. The text is one line: every error names line 1.

func init() {
	registerScript("rate-limiter-flexible v2.0.0–v11.1.0", "RateLimiterRedis incrTtl", textRLFlexIncrTTL, func(c scriptRun) { rlFlexIncrTTL(&c) })
}

func rlFlexIncrTTL(c *scriptRun) {
	const at = "redis.call" // the only line
	key, ok := c.key(1)
	secs, okS := c.arg(2)
	if !ok || !okS {
		c.fail(at, luaBadArgs)
		return
	}
	if !c.writable(at) {
		return
	}
	if !c.tx.Exists(key) {
		if e := c.setEx(key, []byte("0"), secs, false, "set"); e != "" {
			c.fail(at, e)
			return
		}
	} else if _, e := expireMs(secs, true, "set"); e != "" {
		c.fail(at, e) // SET checks its expiry before NX
		return
	}
	points, ok := c.arg(1)
	if !ok {
		c.fail(at, luaBadArgs)
		return
	}
	consumed, e := c.incrBy(key, points)
	if e != "" {
		c.fail(at, e)
		return
	}
	ttl := float64(c.tx.PTTL(key))
	if ttl == -1 {
		if e := c.pexpire(key, secs, false, "expire"); e != "" {
			c.fail(at, e)
			return
		}
		n, isNum := luaNumber(secs)
		if !isNum {
			c.luaError(at, luaArith)
			return
		}
		ttl = 1000 * n
	}
	c.w.Array(2)
	c.w.Int(consumed)
	c.w.Int(luaInt(ttl))
}
