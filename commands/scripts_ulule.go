package commands

// ulule/limiter's Redis store scripts (v3.7.0–v3.11.2), natively: a counter that starts at
// the first hit with a PX TTL of the period.
//
//	incr: ret = INCRBY key count; if ret == count: PEXPIRE key period_ms when > 0, reply
//	      {ret, period_ms}; else reply {ret, PTTL key}.
//	peek: v = GET key; nil: {0, 0}; else {tonumber(v), PTTL key} (an array ending at the
//	      first nil, as Redis converts a Lua table: {} when v is not a number).

func init() {
	const lib = "ulule/limiter v3.7.0–v3.11.2"
	registerScript(lib, "incr", textUluleIncr, func(c scriptRun) { ululeIncr(&c) })
	registerScript(lib, "peek", textUlulePeek, func(c scriptRun) { ululePeek(&c) })
}

func ululeIncr(c *scriptRun) {
	const at = `redis.call("incrby"`
	count, hasCount := c.num(1)
	ttl, hasTTL := c.num(2)
	key, ok := c.key(1)
	countArg, okC := c.arg(1)
	if !ok || !okC {
		c.fail(at, luaBadArgs)
		return
	}
	ret, ok := c.incrByAt(at, key, countArg)
	if !ok {
		return
	}
	if hasCount && float64(ret) == count {
		if !hasTTL {
			c.luaError("if ttl > 0", luaCompare)
			return
		}
		if ttl > 0 {
			const at = `redis.call("pexpire"`
			period, _ := c.arg(2)
			if e := c.pexpire(key, period, true, "pexpire"); e != "" {
				c.fail(at, e)
				return
			}
		}
		c.w.Array(2)
		c.w.Int(ret)
		c.w.Int(luaInt(ttl))
		return
	}
	c.w.Array(2)
	c.w.Int(ret)
	c.w.Int(c.tx.PTTL(key))
}

func ululePeek(c *scriptRun) {
	key, ok := c.keyAt(1, `redis.call("get"`)
	if !ok {
		return
	}
	v, found := c.tx.Get(key)
	if !found {
		c.w.Array(2)
		c.w.Int(0)
		c.w.Int(0)
		return
	}
	n, isNum := luaNumber(v)
	if !isNum {
		c.w.Array(0)
		return
	}
	c.w.Array(2)
	c.w.Int(luaInt(n))
	c.w.Int(c.tx.PTTL(key))
}
