package commands

import "math"

// go-redis/redis_rate's GCRA scripts (allowN, allowAtMost; v8.0.0 to v10.0.1), natively.
//
// The key holds the theoretical arrival time (TAT) as the script stores it: a number of
// seconds since 2017-01-01 as Redis 7.0 formats a Lua number ("%.17g"), with SET ... EX
// of the seconds until then rounded up. The clock is the server's (the script calls
// TIME): tx.NowUs(), in microseconds as Redis's TIME. Every step is the
// script's float64 arithmetic in its order, so the replies are the ones Redis gives:
// {allowed, remaining} as integers (Lua numbers truncated), retry_after and reset_after as
// tostring's "%.14g" strings ("-1" when allowed).
//
// The versions differ in small ways, which rrVersion names: v9.0 rounds remaining with
// floor(x+0.5) (and allowAtMost refuses when it is 0), v9.0 and v9.1.0 always SET (an
// expiry of 0 s is then the error Redis gives), v8's single script answers "limited"
// instead of "allowed".

type rrVersion int

const (
	rr8   rrVersion = iota // v8.0.0 gcra
	rr90                   // v9.0.0–v9.0.2
	rr910                  // v9.1.0
	rr911                  // v9.1.1–v10.0.1
)

func init() {
	const lib = "go-redis/redis_rate"
	registerScript(lib+" v9.1.1–v10.0.1", "allowN", textRedisRateAllowN, func(c scriptRun) { redisRateAllowN(&c, rr911) })
	registerScript(lib+" v9.1.1–v10.0.1", "allowAtMost", textRedisRateAllowAtMost, func(c scriptRun) { redisRateAllowAtMost(&c, rr911) })
	registerScript(lib+" v9.1.0", "allowN", textRedisRateAllowN910, func(c scriptRun) { redisRateAllowN(&c, rr910) })
	registerScript(lib+" v9.1.0", "allowAtMost", textRedisRateAllowAtMost910, func(c scriptRun) { redisRateAllowAtMost(&c, rr910) })
	registerScript(lib+" v9.0.0–v9.0.2", "allowN", textRedisRateAllowN90, func(c scriptRun) { redisRateAllowN(&c, rr90) })
	registerScript(lib+" v9.0.0–v9.0.2", "allowAtMost", textRedisRateAllowAtMost90, func(c scriptRun) { redisRateAllowAtMost(&c, rr90) })
	registerScript(lib+" v8.0.0", "gcra", textRedisRateGCRA8, func(c scriptRun) { redisRateAllowN(&c, rr8) })
}

// jan2017 is the script's epoch, in Unix seconds.
const jan2017 = 1483228800

// redisRateNow is the script's now: (TIME[1] - jan_1_2017) + TIME[2] / 1000000, of a
// TIME of us microseconds since the epoch.
func redisRateNow(us int64) float64 {
	sec, usec := us/1_000_000, us%1_000_000
	if usec < 0 {
		sec, usec = sec-1, usec+1_000_000
	}
	return float64(sec-jan2017) + float64(usec)/1000000
}

// redisRateParams reads the script's numbers: emission = period/rate (false, with the
// error written, when either is not a number), burst and cost with whether each is one
// (the callers report them where the script would fail).
func redisRateParams(c *scriptRun) (emission, burst float64, burstOK bool, cost float64, costOK, ok bool) {
	period, okP := c.num(3)
	rate, okR := c.num(2)
	if !okP || !okR {
		c.luaError("local emission_interval", luaArith)
		return 0, 0, false, 0, false, false
	}
	burst, burstOK = c.num(1)
	cost, costOK = c.num(4)
	return period / rate, burst, burstOK, cost, costOK, true
}

// redisRateTAT runs the script's TIME and GET: now, and max(tat, now) (v8: tat itself, and
// the maximum is taken later). It writes the error and returns false when KEYS[1] is
// missing or the key does not hold a number.
func redisRateTAT(c *scriptRun, v rrVersion) (key int, now, tat float64, ok bool) {
	key, hasKey := c.keyAt(1, `redis.call("GET"`)
	if !hasKey {
		return 0, 0, 0, false
	}
	now = redisRateNow(c.tx.NowUs())
	val, found := c.tx.Get(key)
	if !found {
		return key, now, now, true
	}
	tat, isNum := luaNumber(val)
	if !isNum {
		c.luaError("math.max(tat, now)", luaMaxNil)
		return 0, 0, 0, false
	}
	if v == rr8 {
		return key, now, tat, true
	}
	return key, now, luaMax(tat, now), true
}

// redisRateSet runs the script's SET key new_tat EX math.ceil(reset_after) (v9.1.1: only
// when reset_after > 0) and reports whether the script goes on.
func redisRateSet(c *scriptRun, v rrVersion, key int, newTAT, resetAfter float64) bool {
	if v == rr911 && !(resetAfter > 0) {
		return true
	}
	const marker = `redis.call("SET"`
	if !c.writable(marker) {
		return false
	}
	if e := c.setEx(key, redisArg(newTAT), redisArg(math.Ceil(resetAfter)), false, "set"); e != "" {
		c.fail(marker, e)
		return false
	}
	return true
}

// writeRedisRate writes the script's reply {n, remaining, tostring(retry), tostring(reset)}.
func writeRedisRate(c *scriptRun, n, remaining float64, retry, reset []byte) {
	c.w.Array(4)
	c.w.Int(luaInt(n))
	c.w.Int(luaInt(remaining))
	c.w.Bulk(retry)
	c.w.Bulk(reset)
}

// redisRateAllowN is allowN (and v8's gcra): take cost tokens, or none.
func redisRateAllowN(c *scriptRun, v rrVersion) {
	emission, burst, burstOK, cost, costOK, ok := redisRateParams(c)
	switch {
	case !ok:
		return
	case !costOK:
		c.luaError("local increment", luaArith)
		return
	case !burstOK:
		c.luaError("local burst_offset", luaArith)
		return
	}
	increment := emission * cost
	burstOffset := emission * burst
	key, now, tat, ok := redisRateTAT(c, v)
	if !ok {
		return
	}
	newTAT := tat + increment
	if v == rr8 {
		newTAT = luaMax(tat, now) + increment
	}
	diff := now - (newTAT - burstOffset)
	remaining := diff / emission
	if v <= rr90 {
		remaining = math.Floor(remaining + 0.5)
	}
	if remaining < 0 {
		allowed := 0.0
		if v == rr8 {
			allowed = 1 // v8 answers "limited"
		}
		writeRedisRate(c, allowed, 0, luaToString(-diff), luaToString(tat-now))
		return
	}
	resetAfter := newTAT - now
	if !redisRateSet(c, v, key, newTAT, resetAfter) {
		return
	}
	if v == rr8 {
		writeRedisRate(c, 0, remaining, []byte("-1"), luaToString(resetAfter))
		return
	}
	writeRedisRate(c, cost, remaining, []byte("-1"), luaToString(resetAfter))
}

// redisRateAllowAtMost is allowAtMost: take as many of cost tokens as there are, or none.
func redisRateAllowAtMost(c *scriptRun, v rrVersion) {
	emission, burst, burstOK, cost, costOK, ok := redisRateParams(c)
	switch {
	case !ok:
		return
	case !burstOK:
		c.luaError("local burst_offset", luaArith)
		return
	}
	burstOffset := emission * burst
	key, now, tat, ok := redisRateTAT(c, v)
	if !ok {
		return
	}
	diff := now - (tat - burstOffset)
	remaining := diff / emission
	refuse := remaining < 1
	if v == rr90 {
		remaining = math.Floor(remaining + 0.5)
		refuse = remaining == 0
	}
	if refuse {
		writeRedisRate(c, 0, 0, luaToString(emission-diff), luaToString(tat-now))
		return
	}
	if !costOK {
		c.luaError("if remaining < cost", luaCompare)
		return
	}
	if remaining < cost {
		cost, remaining = remaining, 0
	} else {
		remaining -= cost
	}
	newTAT := tat + emission*cost
	resetAfter := newTAT - now
	if !redisRateSet(c, v, key, newTAT, resetAfter) {
		return
	}
	writeRedisRate(c, cost, remaining, []byte("-1"), luaToString(resetAfter))
}
