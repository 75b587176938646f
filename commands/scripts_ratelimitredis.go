package commands

// rate-limit-redis (express-rate-limit's Redis store) scripts, natively: a counter that
// starts at the first hit with a PX TTL of windowMs. ARGV: resetExpiryOnChange ("1" or
// not), windowMs (v6: windowMs alone). Replies {totalHits, timeToExpire} as integers; get
// {value|nil, PTTL}.
//
//	v6.0.x:        as v4.2.3–v5.0.0 without resetExpiryOnChange.
//	v4.2.3–v5.0.0: ttl = PTTL; if ttl <= 0: SET key 1 PX windowMs, reply {1, windowMs};
//	               else hits = INCR, and with reset PEXPIRE windowMs, ttl = windowMs.
//	v3.x–v4.2.2:   hits = INCR; ttl = PTTL; if ttl <= 0 (v4.2.1–v4.2.2: < 0) or reset:
//	               PEXPIRE windowMs, ttl = windowMs.

func init() {
	const lib = "rate-limit-redis"
	registerScript(lib+" v6.0.x", "increment", textRLRedisIncrement6, func(c scriptRun) { rlRedisIncrementAt(&c, 1, false) })
	registerScript(lib+" v4.2.3–v5.0.0", "increment", textRLRedisIncrement, func(c scriptRun) {
		flag, _ := c.arg(1)
		rlRedisIncrementAt(&c, 2, string(flag) == "1")
	})
	registerScript(lib+" v4.2.1–v4.2.2", "increment", textRLRedisIncrement421, func(c scriptRun) { rlRedisIncrementOld(&c, false) })
	registerScript(lib+" v3.x–v4.2.0", "increment", textRLRedisIncrement3, func(c scriptRun) { rlRedisIncrementOld(&c, true) })
	registerScript(lib+" v4.1.0–v5.0.0", "get", textRLRedisGet, func(c scriptRun) { rlRedisGet(&c) })
}

// rlRedisIncrementAt is the increment of v4.2.3 and later, windowMs being ARGV[window];
// reset: resetExpiryOnChange.
func rlRedisIncrementAt(c *scriptRun, window int, reset bool) {
	windowMs, hasWindow := c.num(window)
	key, ok := c.keyAt(1, `redis.call("PTTL"`)
	if !ok {
		return
	}
	if c.tx.PTTL(key) <= 0 {
		const at = `redis.call("SET"`
		if !hasWindow {
			c.fail(at, luaBadArgs)
			return
		}
		if !c.writable(at) {
			return
		}
		if e := c.setEx(key, []byte("1"), redisArg(windowMs), true, "set"); e != "" {
			c.fail(at, e)
			return
		}
		c.w.Array(2)
		c.w.Int(1)
		c.w.Int(luaInt(windowMs))
		return
	}
	hits, ok := c.incrByAt(`redis.call("INCR"`, key, []byte("1"))
	if !ok {
		return
	}
	rlRedisReply(c, key, hits, float64(c.tx.PTTL(key)), reset, window)
}

// rlRedisReply ends an increment: with expire, PEXPIRE key windowMs (ARGV[window]) and
// ttl = windowMs; then the reply {hits, ttl}.
func rlRedisReply(c *scriptRun, key int, hits int64, ttl float64, expire bool, window int) {
	if expire {
		const at = `redis.call("PEXPIRE"`
		windowMs, hasWindow := c.num(window)
		if !hasWindow {
			c.fail(at, luaBadArgs)
			return
		}
		if e := c.pexpire(key, redisArg(windowMs), true, "pexpire"); e != "" {
			c.fail(at, e)
			return
		}
		ttl = windowMs
	}
	c.w.Array(2)
	c.w.Int(hits)
	c.w.Int(luaInt(ttl))
}

// rlRedisIncrementOld is the increment of v3.x–v4.2.2; zeroExpires: a PTTL of 0 also
// sets the expiry (v3.x–v4.2.0).
func rlRedisIncrementOld(c *scriptRun, zeroExpires bool) {
	key, ok := c.keyAt(1, `redis.call("INCR"`)
	if !ok {
		return
	}
	hits, ok := c.incrByAt(`redis.call("INCR"`, key, []byte("1"))
	if !ok {
		return
	}
	ttl := float64(c.tx.PTTL(key))
	flag, _ := c.arg(1)
	rlRedisReply(c, key, hits, ttl, ttl < 0 || (zeroExpires && ttl == 0) || string(flag) == "1", 2)
}

func rlRedisGet(c *scriptRun) {
	key, ok := c.keyAt(1, `redis.call("GET"`)
	if !ok {
		return
	}
	v, found := c.tx.Get(key)
	c.w.Array(2)
	c.bulkOrFalse(v, found)
	c.w.Int(c.tx.PTTL(key))
}
