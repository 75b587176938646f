package commands

import (
	"bytes"
	"math"
)

// The Python limits library's scripts (Flask-Limiter's backend), natively.
//
// Fixed window (incr_expire, 3.1.6–5.8): INCRBY key amount; when the result equals amount
// (the window's first hit) EXPIRE key expiry; reply the counter. The library reads the
// same key with GET and TTL and clears it with DEL.
//
// Sliding window counter (4.1–5.8): KEYS = previous window, current window; a window's
// counter lives twice the expiry. acquire: when the current window's PTTL is below the
// expiry, it becomes the previous one (RENAME) and a new current starts (SET 0 PX
// ttl+expiry); the weighted count floor(prev*prev_ttl/expiry)+cur plus amount must stay
// within the limit: then INCRBY (or SET amount PX 2*expiry), reply 1; else nil. The read
// script shifts the same way and replies {prev|nil, prev_pttl, cur|nil, cur_pttl}.
//
// The moving window (a list per key) and clear_keys (KEYS pattern) are not supported.

func init() {
	const lib = "limits"
	registerScript(lib+" 3.1.6–5.8", "incr_expire (fixed window)", textLimitsIncrExpire, func(c scriptRun) { limitsIncrExpire(&c) })
	registerScript(lib+" 4.1–5.8", "acquire_sliding_window", textLimitsAcquireSliding, func(c scriptRun) { limitsAcquireSliding(&c) })
	registerScript(lib+" 4.1–5.8", "sliding_window", textLimitsSliding, func(c scriptRun) { limitsSliding(&c) })
}

func limitsIncrExpire(c *scriptRun) {
	const at = `redis.call("incrby"`
	amount, hasAmount := c.num(2)
	key, ok := c.key(1)
	if !ok || !hasAmount {
		c.fail(at, luaBadArgs)
		return
	}
	if !c.writable(at) {
		return
	}
	cur, e := c.incrBy(key, redisArg(amount))
	if e != "" {
		c.fail(at, e)
		return
	}
	if float64(cur) == amount {
		const at = `redis.call("expire"`
		expiry, ok := c.arg(1)
		if !ok {
			c.fail(at, luaBadArgs)
			return
		}
		if e := c.pexpire(key, expiry, false, "expire"); e != "" {
			c.fail(at, e)
			return
		}
	}
	c.w.Int(cur)
}

// limitsShift moves the current window (key cur) to the previous one (key prev) when its
// PTTL is in (0, expiry) ms: RENAME cur prev, SET cur 0 PX ttl+expiry. It reports false
// when it wrote an error.
func limitsShift(c *scriptRun, prev, cur int, expiry float64) bool {
	ttl := float64(c.tx.PTTL(cur))
	if !(ttl > 0 && ttl < expiry) {
		return true
	}
	if !c.writable("redis.call('rename'") {
		return false
	}
	if !c.sameKey(prev, cur) {
		v, _ := c.tx.Get(cur)
		at, _ := c.tx.ExpireAt(cur)
		v = append([]byte(nil), v...)
		if err := c.tx.Set(prev, v, at); err != nil {
			c.fail("redis.call('rename'", errReply(err))
			return false
		}
		c.tx.Del(cur)
	}
	if e := c.setEx(cur, []byte("0"), redisArg(ttl+expiry), true, "set"); e != "" {
		c.fail("redis.call('set', KEYS[2], 0", e)
		return false
	}
	return true
}

// sameKey reports whether key indexes i and j name the same key.
func (c *scriptRun) sameKey(i, j int) bool {
	return i == j || bytes.Equal(c.keyName(i), c.keyName(j))
}

// keyName returns the name of key index i as the request gave it.
func (c *scriptRun) keyName(i int) []byte { return c.keyNames[i-c.base] }

// limitsExpiry is the sliding window scripts' local expiry = ARGV[i] * 1000: it writes
// Lua's error and returns false when ARGV[i] is not a number.
func limitsExpiry(c *scriptRun, i int) (float64, bool) {
	secs, ok := c.num(i)
	if !ok {
		c.luaError("local expiry", luaArith)
	}
	return secs * 1000, ok
}

func limitsAcquireSliding(c *scriptRun) {
	limit, okL := c.num(1)
	expiry, ok := limitsExpiry(c, 2)
	if !ok {
		return
	}
	amount, okA := c.num(3)
	if !okL || !okA {
		c.luaError("if amount > limit", luaCompare)
		return
	}
	if amount > limit {
		c.w.Null()
		return
	}
	cur, ok := c.keyAt(2, "local current_ttl")
	if !ok {
		return
	}
	prev, ok := c.key(1)
	if !ok {
		if ttl := float64(c.tx.PTTL(cur)); ttl > 0 && ttl < expiry {
			c.fail("redis.call('rename'", luaBadArgs)
		} else {
			c.fail("local previous_count", luaBadArgs)
		}
		return
	}
	if !limitsShift(c, prev, cur, expiry) {
		return
	}
	prevCount := c.countOrZero(prev)
	prevTTL := math.Max(0, float64(c.tx.PTTL(prev)))
	curCount := c.countOrZero(cur)
	weighted := math.Floor(prevCount*prevTTL/expiry) + curCount
	if weighted+amount > limit {
		c.w.Null()
		return
	}
	if c.tx.Exists(cur) {
		const at = "redis.call('incrby'"
		if !c.writable(at) {
			return
		}
		if _, e := c.incrBy(cur, redisArg(amount)); e != "" {
			c.fail(at, e)
			return
		}
	} else {
		const at = "redis.call('set', KEYS[2], amount"
		if !c.writable(at) {
			return
		}
		if e := c.setEx(cur, redisArg(amount), redisArg(expiry*2), true, "set"); e != "" {
			c.fail(at, e)
			return
		}
	}
	c.w.Int(1)
}

// countOrZero is tonumber(redis.call('get', key)) or 0.
func (c *scriptRun) countOrZero(i int) float64 {
	v, found := c.tx.Get(i)
	if !found {
		return 0
	}
	n, ok := luaNumber(v)
	if !ok {
		return 0
	}
	return n
}

func limitsSliding(c *scriptRun) {
	expiry, ok := limitsExpiry(c, 1)
	if !ok {
		return
	}
	prev, ok := c.keyAt(1, "local previous_count")
	if !ok {
		return
	}
	cur, ok := c.keyAt(2, "local current_count")
	if !ok {
		return
	}
	if !limitsShift(c, prev, cur, expiry) {
		return
	}
	c.w.Array(4)
	v, found := c.tx.Get(prev)
	c.bulkOrFalse(v, found)
	c.w.Int(c.tx.PTTL(prev))
	v, found = c.tx.Get(cur)
	c.bulkOrFalse(v, found)
	c.w.Int(c.tx.PTTL(cur))
}
